import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { FIXTURES, runCli, workspace } from '../helpers/cli.js';
import { NOBODY } from '../helpers/users.js';

const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];

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
