/**
 * Attempts that fail once the pass has begun to stop for the environment's fault (found by
 * an attempt beside them) are handed back uncharged, as operations.md says: they most likely
 * failed of the same cause, their own check a moment too late (a shell's "Cannot fork" beside
 * cronsafe's own fork refused for the process limit). They were charged, so that each such
 * fault brought the items in flight one attempt nearer to dead-lettering. An item that failed
 * for its own reasons before any stop is still charged. As an unprivileged user: root
 * ignores the modes that make output.directory unwritable here.
 */
import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FIXTURES, spawnCli, statusJson, workspace } from '../helpers/cli.js';
import { attempts, charged } from '../helpers/ledger-sums.js';
import { chownTree, NOBODY } from '../helpers/users.js';
import { until } from '../helpers/wait.js';

const isRoot = process.getuid?.() === 0;

let restore: (() => void) | undefined;
afterEach(() => {
  restore?.();
  restore = undefined;
});

describe.skipIf(!isRoot)('an attempt failing after the pass began to stop for the environment', () => {
  it('is handed back uncharged; an item that failed before the stop is charged', async () => {
    // Default retry settings: the bad item is not tried again within the run (30 s backoff).
    const ws = workspace(
      { handler: { command: ['/bin/sh', path.join(FIXTURES, 'process/fail-after-go.sh'), '{path}', '{output}'] }, concurrency: 3 },
      { 'bad.txt': 'bad\n', 'env.txt': 'env\n', 'beside.txt': 'beside\n' },
    );
    chownTree(ws.dir, NOBODY);
    const gate = (name: string) => path.join(ws.dir, name);
    const run = spawnCli(['run', '-c', ws.configPath], { uid: NOBODY, gid: NOBODY, env: { GATE_DIR: ws.dir } });
    // The bad item fails at once, before anything is wrong: its failure is its own.
    await run.waitFor((l) => l.msg === 'item failed; will retry' && l.itemId === 'bad.txt');
    await until(() => existsSync(gate('env.txt.started')) && existsSync(gate('beside.txt.started')), 'both held attempts to start');
    // cronsafe's temp directory in output.directory made unwritable for the run's user (an
    // operator's chmod): env.txt's failure finds it, and the pass stops for the environment.
    const temp = path.join(ws.out, '.cronsafe-tmp', 'job-test-job');
    chmodSync(temp, 0o555);
    restore = () => chmodSync(temp, 0o755);
    writeFileSync(gate('env.txt.go'), '');
    await run.waitFor((l) => l.msg === 'the environment cannot run items; stopping the pass (nothing charged)');
    // The rights given back before beside.txt's attempt fails: its own check sees nothing
    // wrong any more, as a sibling's can come a moment after the fault passed.
    restore();
    restore = undefined;
    writeFileSync(gate('beside.txt.go'), '');
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(1);
    expect(run.stderr()).toMatch(/cannot be written by this user/);
    expect(await charged(ws.db, ['env.txt']), run.stderr()).toBe(0);
    // Before: 1, "exit code 1: failed: beside.txt" charged to a good item.
    expect(await charged(ws.db, ['beside.txt']), run.stderr()).toBe(0);
    const handedBack = run.lines.filter((l) => l.msg === 'item failed while the pass stops for the environment; claim handed back (attempt not charged)');
    expect(handedBack.map((l) => l.itemId)).toEqual(['beside.txt']);
    // The item that failed before the stop is charged for every attempt it had.
    expect(await attempts(ws.db, ['bad.txt'])).toBeGreaterThanOrEqual(1);
    expect(await charged(ws.db, ['bad.txt'])).toBe(await attempts(ws.db, ['bad.txt']));
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 3, claimed: 0, done: 0, dead: 0 });
  }, 60_000);
});
