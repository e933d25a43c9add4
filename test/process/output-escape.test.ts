import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { configure, FIXTURES, runCli, spawnCli, statusJson, workspace } from '../helpers/cli.js';
import { invocations, killTree } from '../helpers/proc.js';
import { NOBODY } from '../helpers/users.js';
import { until } from '../helpers/wait.js';

const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];
const HELD_COPY = path.join(FIXTURES, 'process/held-copy.sh');

describe('outputs never leave output.directory', () => {
  it('through a symlinked subdirectory: the output is refused, nothing lands in the link target', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'sub/x.txt': 'x', 'sub/deeper/y.txt': 'y', 'top.txt': 't' });
    const elsewhere = path.join(ws.dir, 'elsewhere');
    mkdirSync(elsewhere);
    mkdirSync(ws.out);
    symlinkSync(elsewhere, path.join(ws.out, 'sub'));

    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(readdirSync(elsewhere)).toEqual([]); // before: x.txt.out and deeper/ landed here
    expect(existsSync(path.join(ws.out, 'top.txt.out'))).toBe(true);
    const ledger = await openSqliteLedger(ws.db);
    try {
      for (const id of ['sub/x.txt', 'sub/deeper/y.txt']) {
        const item = await ledger.get(id);
        expect(item?.state).not.toBe('done');
        expect(item?.lastError).toContain(`${path.join(ws.out, 'sub')} is a symbolic link`);
      }
    } finally {
      await ledger.close();
    }
  });
});

describe.skipIf(process.getuid?.() !== 0)('outputs never go into another user\'s directory in output.directory', () => {
  it('a directory another user made there first (a shared, sticky output.directory): refused, nothing written in it', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'sub/x.txt': 'x', 'top.txt': 't' });
    // Another user who may write in output.directory (mode 1777, as /tmp) made `sub` before
    // cronsafe did: it could swap what is in it for a link to anywhere between cronsafe's
    // check of the directories on an output's way and its rename through them, and cronsafe,
    // as root here, would write where that user may not.
    mkdirSync(ws.out);
    chmodSync(ws.out, 0o1777);
    const theirs = path.join(ws.out, 'sub');
    mkdirSync(theirs);
    chmodSync(theirs, 0o777);
    chownSync(theirs, NOBODY, NOBODY);

    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(readdirSync(theirs)).toEqual([]); // before: x.txt.out was renamed into it
    expect(existsSync(path.join(ws.out, 'top.txt.out'))).toBe(true);
    const ledger = await openSqliteLedger(ws.db);
    try {
      const item = await ledger.get('sub/x.txt');
      expect(item?.state).toBe('dead');
      expect(item?.lastError).toContain(`${theirs} is owned by uid ${NOBODY}, another user`);
      expect(item?.lastError).toContain('the handler was not run');
      expect((await ledger.get('top.txt'))?.state).toBe('done');
    } finally {
      await ledger.close();
    }
  });
});

describe.skipIf(process.getuid?.() !== 0)('another user\'s file at <id>.out is never taken for a committed output', () => {
  it('planted while the item was claimed, then the run killed: the item is run again, not done by that file', async () => {
    const ws = workspace({}, { 'x.txt': 'the real payload\n' });
    const log = path.join(ws.dir, 'invocations.log');
    configure(ws, { handler: { command: ['/bin/sh', HELD_COPY, '{path}', '{output}'], env: { INVOCATIONS: log, HOLD_ID: 'x.txt', HOLD_DIR: ws.dir } } });
    mkdirSync(ws.out);
    chmodSync(ws.out, 0o1777); // shared: other users may make files in it
    const run = spawnCli(['run', '-c', ws.configPath]);
    await until(() => existsSync(path.join(ws.dir, 'held')), 'x.txt claimed and running');
    // Another user puts their own file where the output goes, after the claim, and the run
    // dies (SIGKILL, OOM) before the attempt ends.
    const planted = path.join(ws.out, 'x.txt.out');
    writeFileSync(planted, 'planted by another user\n');
    chownSync(planted, NOBODY, NOBODY);
    killTree(run.child.pid!);
    await run.exited;
    writeFileSync(path.join(ws.dir, 'release'), '');

    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    // Before: `"doneByOutput":1`, the item done by the planted file, its handler never finished.
    expect(r.stdout).not.toMatch(/"doneByOutput":1/);
    expect(invocations(log).get('x.txt')).toBe(2);
    expect(readFileSync(planted, 'utf8')).toBe('the real payload\n');
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
  });
});
