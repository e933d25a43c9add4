/**
 * A handler that does not check its write (`cat "$1" > "$2"; echo converted`) and exits 0
 * while cronsafe's temp directory cannot be written by its user (an operator's
 * `chmod -R a-w` of output.directory mid-run, or a sibling's handler that made the directory
 * of its {output} read-only): its {output} could not be created. Before, once an output of
 * the pass had been committed, its item was recorded done with no output, for good (only a
 * read-only file system was asked about). As an unprivileged user: root ignores the modes.
 */
import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { configure, FIXTURES, runCli, spawnCli, statusJson, workspace } from '../helpers/cli.js';
import { charged } from '../helpers/ledger-sums.js';
import { chownTree, NOBODY } from '../helpers/users.js';
import { until } from '../helpers/wait.js';

const isRoot = process.getuid?.() === 0;
const HANDLER = ['/bin/sh', path.join(FIXTURES, 'process/sloppy-after-go.sh'), '{path}', '{output}'];

describe.skipIf(!isRoot)('a handler that exits 0 without its output while the temp directory is unwritable', () => {
  it('is handed back uncharged and the pass stops (exit 1), not recorded done with no output', async () => {
    // retry.maxAttempts is the default; b.txt waits for a.txt's output to be committed.
    const ws = workspace({ concurrency: 2 }, { 'a.txt': 'a\n', 'b.txt': 'b\n' });
    const ready = path.join(ws.dir, 'ready');
    const go = path.join(ws.dir, 'go');
    configure(ws, { handler: { command: HANDLER, env: { WAIT_ID: 'b.txt', AFTER: path.join(ws.out, 'a.txt.out'), READY: ready, GO: go } } });
    chownTree(ws.dir, NOBODY);
    const as = { uid: NOBODY, gid: NOBODY };
    const run = spawnCli(['run', '-c', ws.configPath], as);
    await until(() => existsSync(ready), 'b.txt waiting with a.txt committed');
    // The operator freezes the output volume (as root; the run's user cannot write it now).
    execFileSync('chmod', ['-R', 'a-w', ws.out]);
    writeFileSync(go, '');
    const { code } = await run.exited;
    chmodSync(ws.out, 0o755);
    // Before: exit 0, b.txt done, and no b.txt.out.
    expect(code, run.stderr()).toBe(1);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 1, claimed: 0, done: 1, dead: 0 });
    expect(await charged(ws.db, ['b.txt'])).toBe(0);
    execFileSync('chmod', ['-R', 'u+w', ws.out]);
    const next = await runCli(['run', '-c', ws.configPath], as);
    expect(next.code, next.stderr).toBe(0);
    expect(existsSync(path.join(ws.out, 'b.txt.out'))).toBe(true);
  }, 60_000);
});
