import { existsSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { FIXTURES, runCli, workspace } from '../helpers/cli.js';

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
