import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { CLI, finished, runCli, spawnCliRaw, statusJson, workspace } from '../helpers/cli.js';

/**
 * A file system mounted inside output.directory (a volume per customer at `<out>/sub`, or
 * a tmpfs over cronsafe's own `.cronsafe-tmp`): the output cannot be renamed there from the
 * temp directory (EXDEV). That is the environment's fault, as a directory cronsafe may not
 * write is: the pass stops with exit 1 and nothing is charged, so the items are not
 * dead-lettered run after run while someone fixes the mount. The mounts are made in a
 * private mount namespace (`unshare -m`), so nothing leaks into the machine's mount table.
 */

const probeDir = mkdtempSync(path.join(tmpdir(), 'cronsafe-xdev-probe-'));
afterAll(() => rmSync(probeDir, { recursive: true, force: true }));
const probe = spawnSync('unshare', ['-m', 'sh', '-ec', 'mount -t tmpfs cronsafe-test "$1"', 'sh', probeDir], { encoding: 'utf8', timeout: 20_000 });
const noTmpfs = probe.error ? probe.error.message : probe.status === 0 ? null : probe.stderr.trim() || `exit ${probe.status}`;
const skipped = noTmpfs ? ` (skipped: cannot mount a tmpfs here: ${noTmpfs})` : '';

async function charged(db: string): Promise<Record<string, number>> {
  const ledger = await openSqliteLedger(db);
  try {
    const out: Record<string, number> = {};
    for (const id of ['a.txt', 'sub/b.txt', 'sub/c.txt']) {
      const r = await ledger.get(id);
      out[id] = r ? r.attempts - r.released : 0;
    }
    return out;
  } finally {
    await ledger.close();
  }
}

/** `cronsafe run` with a tmpfs mounted at `mountPoint` (inside output.directory) for that run only. */
async function runWithMount(configPath: string, mountPoint: string) {
  mkdirSync(mountPoint, { recursive: true });
  const script = 'mount -t tmpfs cronsafe-test "$MP"\n"$NODE" "$CLI" "$@"';
  const r = spawnCliRaw('unshare', ['-m', 'sh', '-ec', script, 'sh', 'run', '-c', configPath], {
    env: { MP: mountPoint, NODE: process.execPath, CLI },
    timeoutMs: 60_000,
  });
  const { code } = await r.exited;
  return { code, lines: r.lines, stderr: r.stderr() };
}

describe('an output that cannot be renamed into place across file systems (EXDEV)', () => {
  for (const where of ['sub', '.cronsafe-tmp']) {
    it.skipIf(noTmpfs !== null)(`a mount at <out>/${where}: the pass stops with exit 1, nothing is charged, and the next run without it finishes${skipped}`, async () => {
      const ws = workspace({ concurrency: 1, handler: { command: ['cp', '{path}', '{output}'] } }, { 'a.txt': 'a', 'sub/b.txt': 'b', 'sub/c.txt': 'c' });
      const r = await runWithMount(ws.configPath, path.join(ws.out, where));
      expect(r.code, r.stderr).toBe(1);
      expect(finished(r)).toMatchObject({ outcome: 'failed', exitCode: 1 });
      expect(r.stderr).toMatch(/EXDEV/);
      expect(r.stderr).toContain(`another file system`);
      const items = (await statusJson(ws.configPath)).items;
      expect(items).toMatchObject({ claimed: 0, dead: 0 });
      // Only attempts that succeeded are charged; the ones refused by the rename are not.
      const c = await charged(ws.db);
      expect(c).toMatchObject({ 'a.txt': items.done === 1 ? 1 : 0, 'sub/b.txt': 0, 'sub/c.txt': 0 });

      const next = await runCli(['run', '-c', ws.configPath]);
      expect(next.code, next.stderr).toBe(0);
      expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 0, claimed: 0, done: 3, dead: 0 });
      expect(await charged(ws.db)).toEqual({ 'a.txt': 1, 'sub/b.txt': 1, 'sub/c.txt': 1 });
      expect(existsSync(path.join(ws.out, 'sub', 'b.txt.out'))).toBe(true);
    });
  }
});
