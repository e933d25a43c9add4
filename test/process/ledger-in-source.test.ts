import { chmodSync, existsSync, linkSync, mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
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

  // path.relative() gives `..state/job.db` for them, which was read as "outside the source".
  it("in a directory of the source whose name starts with '..' (with the handler's script): never items", async () => {
    const ws = workspace({ source: { include: ['*', '.*/*'] } }, { a: 'a' });
    const log = path.join(ws.dir, 'ran');
    const script = path.join(ws.source, '..bin', 'h.sh');
    mkdirSync(path.dirname(script));
    writeFileSync(script, `#!/bin/sh\necho "$1" >> ${log}\ncp "$1" "$2"\n`);
    chmodSync(script, 0o755);
    configure(ws, {
      source: { directory: ws.source, include: ['*', '.*/*'] },
      handler: { command: [script, '{id}', '{output}'] },
      state: { sqlite: path.join(ws.source, '..state', 'job.db') },
      lock: { path: path.join(ws.source, '..state', 'job.lock') },
    });
    for (let i = 0; i < 2; i++) {
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(0);
      expect(finished(r)?.counts).toMatchObject({ scanned: 1, succeeded: i === 0 ? 1 : 0, gone: 0 });
    }
    expect(readFileSync(log, 'utf8')).toBe('a\n');
  });
});
