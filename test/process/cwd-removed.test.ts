/**
 * A shell left in a directory that was removed since (a release directory a deploy replaced,
 * a scratch directory cleaned up) runs `cronsafe status` with the default `./cronsafe.yaml`,
 * or `-c` / `$CRONSAFE_CONFIG` relative: getcwd(3) fails, and every command ended with exit 1
 * and Node's raw stack (`Error: ENOENT: no such file or directory, uv_cwd`, ten lines of
 * `at ...`). It is a config file that cannot be found: exit 78, one line saying why.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, runCli, spawnCliRaw, statusJson, workspace } from '../helpers/cli.js';

/** The CLI started in `dir`, removed just before (as a shell that stayed there). */
async function inRemoved(dir: string, args: string[], env: Record<string, string> = {}) {
  mkdirSync(dir);
  const p = spawnCliRaw('sh', ['-c', 'cd "$0" && rmdir "$0" && exec "$@"', dir, process.execPath, CLI, ...args], { env });
  const { code } = await p.exited;
  return { code, stdout: p.stdout(), stderr: p.stderr() };
}

describe('a relative config path from a working directory that was removed', () => {
  it('default ./cronsafe.yaml, -c and CRONSAFE_CONFIG relative: exit 78 in one line; -c absolute still works there', async () => {
    const ws = workspace({ handler: { command: ['cp', '{path}', '{output}'] } }, { 'a.txt': 'a' });
    const cases: Array<[string[], Record<string, string>, string]> = [
      [['status'], {}, 'cronsafe.yaml'],
      [['run', '-c', '../cronsafe.yaml'], {}, '../cronsafe.yaml'],
      [['validate'], { CRONSAFE_CONFIG: 'job.yaml' }, 'job.yaml'],
    ];
    for (const [i, [args, env, shown]] of cases.entries()) {
      const r = await inRemoved(path.join(ws.dir, `gone-${i}`), args, env);
      expect(r.stderr, args.join(' ')).toContain(`cronsafe: config error: config file ${shown} cannot be found: it is relative to the current directory, which no longer exists`);
      expect(r.stderr, args.join(' ')).not.toMatch(/uv_cwd|\n\s+at /);
      expect(r.code, args.join(' ')).toBe(78);
    }
    // Nothing ran; given absolute, the config is found from there as anywhere.
    const run = await inRemoved(path.join(ws.dir, 'gone-abs'), ['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
    expect((await runCli(['status', '-c', ws.configPath])).code).toBe(0);
  }, 60_000);
});
