/**
 * An item whose name is not UTF-8 reaches a handler through a link made for the attempt;
 * without output.directory, in a fresh `cronsafe-item-*` directory under TMPDIR. A run
 * killed during such an attempt (SIGKILL, the OOM killer) left that directory behind for
 * good: on a host's /tmp (plain cron, `cronsafe daemon`) one more per killed attempt. Now a
 * later run removes the ones nobody holds, and never one a live run is using.
 */
import { mkdirSync, mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, spawnCli, workspace, type Workspace } from '../helpers/cli.js';
import { filesIn, until } from '../helpers/wait.js';

const linkDirs = (dir: string) => filesIn(dir).filter((n) => n.startsWith('cronsafe-item-'));
/** Two minutes old: past the minute a fresh directory is spared. */
const age = (dir: string) => {
  const then = new Date(Date.now() - 120_000);
  for (const n of linkDirs(dir)) utimesSync(path.join(dir, n), then, then);
};

function blockedJob(name: string, marker: string) {
  // Blocks until killed once it has touched its marker.
  const cmd = ['/bin/sh', '-c', 'touch "$0"; exec sleep 60', marker, '{path}'];
  return withByteName(workspace({ name, handler: { command: cmd }, output: undefined }, {}));
}

/** The workspace with one item named in bytes that are not UTF-8 (`caf\xe9.txt`, Latin-1). */
function withByteName(ws: Workspace): Workspace {
  writeFileSync(Buffer.concat([Buffer.from(`${ws.source}/`), Buffer.from('caf\xe9.txt', 'latin1')]), 'x');
  return ws;
}

describe('TMPDIR link directories of killed runs', () => {
  it('a killed run leaves one; the next run removes it, and spares a live run and a fresh one', async () => {
    const tmp = mkdtempSync(path.join(tmpdir(), 'cronsafe-tmpdir-'));
    const env = { TMPDIR: tmp };

    // A run killed during its attempt.
    const killed = path.join(tmp, 'killed-started');
    const a = blockedJob('job-a', killed);
    const first = spawnCli(['run', '-c', a.configPath], { env });
    await until(() => filesIn(tmp).includes('killed-started'), 'the first attempt to start');
    first.child.kill('SIGKILL');
    await first.exited;
    expect(linkDirs(tmp)).toHaveLength(1);
    const dead = linkDirs(tmp)[0]!;

    // A live run of another job, whose directory is as old, and a fresh unheld one.
    const live = path.join(tmp, 'live-started');
    const b = blockedJob('job-b', live);
    const other = spawnCli(['run', '-c', b.configPath], { env });
    await until(() => filesIn(tmp).includes('live-started'), 'the live attempt to start');
    const held = linkDirs(tmp).find((n) => n !== dead)!;
    expect(held).toBeDefined();
    age(tmp);
    mkdirSync(path.join(tmp, 'cronsafe-item-fresh'));

    // A later run (of any job) in that TMPDIR.
    const c = withByteName(workspace({ name: 'job-c', handler: { command: ['/bin/sh', '-c', 'test -f "$0"', '{path}'] }, output: undefined }, {}));
    const next = await runCli(['run', '-c', c.configPath], { env });
    expect(next.code, next.stderr).toBe(0);
    // Before: the killed run's directory stayed.
    expect(linkDirs(tmp).sort()).toEqual([held, 'cronsafe-item-fresh'].sort());

    other.child.kill('SIGKILL');
    await other.exited;
  }, 40_000);

  // The sweep removed, recursively, every directory of this uid named `cronsafe-item-*` that
  // was a minute old and unheld: a user's `/tmp/cronsafe-item-notes` with its files went too.
  // Only a directory as mkdtemp names ours, holding nothing but a link, is a killed run's.
  it('a directory of that prefix that is not a link directory of ours is left alone, with its files', async () => {
    const tmp = mkdtempSync(path.join(tmpdir(), 'cronsafe-tmpdir-'));
    const notes = path.join(tmp, 'cronsafe-item-notes');
    const lookalike = path.join(tmp, 'cronsafe-item-Ab12Cd');
    for (const d of [notes, lookalike]) {
      mkdirSync(d);
      writeFileSync(path.join(d, 'keep.txt'), 'mine\n');
    }
    age(tmp);
    const c = withByteName(workspace({ name: 'job-c', handler: { command: ['/bin/sh', '-c', 'test -f "$0"', '{path}'] }, output: undefined }, {}));
    const next = await runCli(['run', '-c', c.configPath], { env: { TMPDIR: tmp } });
    expect(next.code, next.stderr).toBe(0);
    expect(filesIn(notes)).toEqual(['keep.txt']);
    expect(filesIn(lookalike)).toEqual(['keep.txt']);
  }, 40_000);
});
