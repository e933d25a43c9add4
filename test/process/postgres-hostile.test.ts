import { existsSync, mkdirSync, readdirSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURES, runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];

/** Issue 10's hostile environment, on the PostgreSQL ledger (each run its own temp directory). */
describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a hostile environment', () => {
  let server: PgServer;
  let url = '';
  let n = 0;
  beforeAll(async () => {
    server = await startPostgres();
    url = await server.createDatabase('hostile');
  });
  afterAll(async () => {
    await server?.stop();
  });
  const state = () => ({ postgres: url, schema: `h_${++n}` });

  it('a symlinked .cronsafe-tmp is refused with exit 1; a stale run directory that is a link loses only the link', async () => {
    const ws = workspace({ handler: { command: COPY }, state: state() }, { 'a.txt': 'a' });
    const target = path.join(ws.dir, 'precious');
    mkdirSync(target);
    writeFileSync(path.join(target, 'keep.txt'), 'keep');
    mkdirSync(ws.out);
    const tmp = path.join(ws.out, '.cronsafe-tmp');
    symlinkSync(target, tmp);
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/\.cronsafe-tmp is a symbolic link/);
    expect(readdirSync(target)).toEqual(['keep.txt']);
    expect(existsSync(path.join(ws.out, 'a.txt.out'))).toBe(false);

    // A real temp directory whose "stale run directory" is a link to precious files.
    rmSync(tmp);
    mkdirSync(tmp);
    symlinkSync(target, path.join(tmp, 'old-run'));
    const old = new Date(Date.now() - 24 * 3600_000);
    utimesSync(target, old, old);
    utimesSync(path.join(target, 'keep.txt'), old, old);
    const ok = await runCli(['run', '-c', ws.configPath]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(readdirSync(target)).toEqual(['keep.txt']);
    expect(existsSync(path.join(ws.out, 'a.txt.out'))).toBe(true);
  });

  it('a handler.command program that does not exist: exit 78 before anything is claimed', async () => {
    const st = state();
    const ws = workspace({ handler: { command: ['cronsafe-no-such-program', '{path}'] }, state: st }, { 'a.txt': 'a' });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toContain('handler.command');
    // Nothing reached the database: not even the schema (before: the item was dead-lettered there).
    const [row] = await server.admin<{ present: boolean }>(`SELECT to_regnamespace($1) IS NOT NULL AS present`, [st.schema], 'hostile');
    expect(row?.present).toBe(false);
  });
});
