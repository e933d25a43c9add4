import { existsSync, linkSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, configure, finished, runCli, statusJson, workspace } from '../helpers/cli.js';

const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];

describe('the ledger and the lock inside source.directory, named through a link', () => {
  it('are never items: the handler never gets the live ledger', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a' });
    mkdirSync(path.join(ws.source, 'state'));
    const link = path.join(ws.dir, 'link-to-source');
    symlinkSync(ws.source, link);
    configure(ws, {
      state: { sqlite: path.join(link, 'state', 'ledger.db') },
      lock: { path: path.join(link, 'state', 'job.lock') },
    });
    for (let i = 0; i < 2; i++) {
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(0);
      expect(finished(r)?.counts).toMatchObject({ scanned: 1, succeeded: i === 0 ? 1 : 0 });
    }
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
    expect(existsSync(path.join(ws.out, 'state'))).toBe(false);
  });

  it('a hard link in the source to the ledger or the lock file is not an item either', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a' });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    // Two names of one file (a `cp -al` or an rsync --link-dest snapshot taken into the source).
    linkSync(ws.db, path.join(ws.source, 'ledger-snapshot.db'));
    linkSync(path.join(ws.state, 'cronsafe.lock'), path.join(ws.source, 'job.lock'));
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)?.counts).toMatchObject({ scanned: 1, claimed: 0 });
    expect(readdirSync(ws.out).filter((f) => f !== '.cronsafe-tmp')).toEqual(['a.txt.out']);
  });
});
