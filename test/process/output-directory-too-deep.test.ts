/**
 * An output.directory so deep that the paths of cronsafe's temp files in it
 * (`<out>/.cronsafe-tmp/job-<name>/<name>.tmp`) pass Linux's PATH_MAX while the directory
 * itself does not: the run created it, and every handler failed to create its {output}
 * ("File name too long"), each item charged until the whole backlog was dead-lettered, exit 0.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, FIXTURES, runCli, statusJson, workspace } from '../helpers/cli.js';

const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];

/** A path under `base` of exactly `bytes` bytes, in names of at most 200. */
function deepPath(base: string, bytes: number): string {
  let p = base;
  while (Buffer.byteLength(p) + 201 < bytes) p = path.join(p, 'o'.repeat(200));
  return path.join(p, 'p'.repeat(bytes - Buffer.byteLength(p) - 1));
}

describe('output.directory too deep for its temp files', () => {
  it('validate and run exit 78 naming output.directory; nothing claimed or charged', async () => {
    const ws = workspace({ handler: { command: COPY }, retry: { maxAttempts: 1 } }, { 'a.txt': 'a\n' });
    const out = deepPath(ws.dir, 4060);
    expect(Buffer.byteLength(out)).toBe(4060);
    configure(ws, { output: { directory: out } });
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', ws.configPath]);
      // Before: run exited 0 with a.txt dead-lettered for "cannot create <out>/.cronsafe-tmp/...: File name too long".
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toMatch(/output\.directory: is too long: the paths of cronsafe's temp files in it/);
    }
    // Refused before the ledger is opened: no run made it, nothing claimed.
    expect(existsSync(ws.db)).toBe(false);
  });

  it('one a little shorter is fine: the item is done', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a\n' });
    const out = deepPath(ws.dir, 3900);
    configure(ws, { output: { directory: out } });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ done: 1, dead: 0 });
  });
});
