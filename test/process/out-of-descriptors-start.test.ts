/**
 * A start under a `ulimit -n` too low for it: what cronsafe opens first (fs-ext, better-sqlite3,
 * the ledger with its -wal and -shm, the start journal) failed with words that did not say
 * so: "Cannot find module 'better-sqlite3'", "unable to open database file", each after the
 * run's flock had made an empty ledger file, which `status` then refused (exit 1: "no ledger
 * yet ... a full disk?") until the next run. Each limit from the lowest at which cronsafe
 * itself starts (Node's own start needs some) up past the start-up is tried.
 */
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CLI, runCli, spawnCliRaw, workspace } from '../helpers/cli.js';

/** The CLI under `ulimit -n <limit>`. */
async function limited(limit: number, args: string[]) {
  const r = spawnCliRaw('/bin/sh', ['-c', `ulimit -n ${limit} && exec "$0" "$@"`, process.execPath, CLI, ...args]);
  const { code } = await r.exited;
  return { code, stderr: r.stderr() };
}

/** The lowest limit at which Node loads cronsafe at all (below it, Node's own loader fails, or Node crashes); found once. */
let lowest: Promise<number> | undefined;
function lowestStart(configPath: string): Promise<number> {
  lowest ??= (async () => {
    for (let limit = 12; limit < 64; limit++) if ((await limited(limit, ['validate', '-c', configPath])).code === 0) return limit;
    throw new Error('validate never started under a low ulimit -n');
  })();
  return lowest;
}

describe('a start out of file descriptors', () => {
  it('at each low ulimit -n: exit 0, or exit 1 with one line saying so, naming the limit and what was being opened; no empty ledger left; the next run finishes', async () => {
    const files = { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' };
    const ws = workspace({ handler: { command: ['/bin/sh', '-c', 'cat "$1" > "$2"', 'sh', '{path}', '{output}'] } }, files);
    const base = await lowestStart(ws.configPath);
    const said: string[] = [];
    for (let limit = base; limit <= base + 7; limit++) {
      const r = await limited(limit, ['run', '-c', ws.configPath]);
      expect([0, 1], `ulimit -n ${limit}: ${r.stderr}`).toContain(r.code);
      if (r.code === 1) {
        expect(r.stderr, `ulimit -n ${limit}`).toMatch(new RegExp(`^cronsafe: (run failed: )?out of file descriptors[^\\n]*\\(ulimit -n ${limit}, RLIMIT_NOFILE\\)[^\\n]*\\n$`));
        said.push(r.stderr);
      }
      // No ledger, or one status reads: never the empty file a first run "is creating now".
      if (existsSync(ws.db)) {
        const status = await runCli(['status', '-c', ws.configPath, '--json']);
        expect(status.code, `ulimit -n ${limit}: status: ${status.stderr}`).toBe(0);
      }
    }
    // What was being opened is named, not the loader's or SQLite's words alone.
    const all = said.join('');
    expect(all).toMatch(/loading (fs-ext|better-sqlite3) \([^)]*\)[^\n]*Cannot find module/);
    expect(all).toMatch(/opening the ledger [^\n]*SQLite said: unable to open database file/);
    const next = await runCli(['run', '-c', ws.configPath]);
    expect(next.code, next.stderr).toBe(0);
    const status = await runCli(['status', '-c', ws.configPath, '--json']);
    expect((JSON.parse(status.stdout) as { items: unknown }).items).toEqual({ pending: 0, claimed: 0, done: 3, dead: 0 });
  }, 240_000);

  it('an operator\'s requeue at a ulimit -n too low to open the ledger: the cause in one line, and nothing changed', async () => {
    const ws = workspace({ handler: { command: ['/bin/sh', '-c', 'cat "$1" > "$2"', 'sh', '{path}', '{output}'] } }, { 'a.txt': 'a' });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    let refused = 0;
    for (let limit = await lowestStart(ws.configPath); limit < 64; limit++) {
      const r = await limited(limit, ['requeue', '--all', '-c', ws.configPath]);
      if (r.code === 0) break;
      expect(r.code, `ulimit -n ${limit}: ${r.stderr}`).toBe(1);
      expect(r.stderr, `ulimit -n ${limit}`).toMatch(new RegExp(`^cronsafe: out of file descriptors \\(EMFILE: too many open files\\): this process's limit \\(ulimit -n ${limit}, RLIMIT_NOFILE\\) is reached, (loading|opening) [^\\n]*\\n$`));
      refused++;
      const status = await runCli(['status', '-c', ws.configPath, '--json']);
      expect((JSON.parse(status.stdout) as { items: unknown }).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
    }
    expect(refused, 'no ulimit -n stopped the requeue before the ledger').toBeGreaterThan(0);
  }, 240_000);
});
