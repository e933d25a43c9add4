import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openPostgresLedger } from '../../src/ledger/postgres/index.js';
import { FIXTURES, runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';

const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];
const FILES = { 'a.txt': 'a', 'b.txt': 'b' };
const outputs = (dir: string) => (existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.out')).sort() : []);

describe.skipIf(PG_SKIP_REASON !== undefined)('a PostgreSQL ledger belongs to one job', () => {
  const pg = usePostgresDatabase('identity');

  it('a second job on the same schema is refused with exit 78 naming state.schema and name; status too', async () => {
    const state = { postgres: pg.url, schema: 'shared' };
    const alpha = workspace({ name: 'alpha', handler: { command: COPY }, state }, FILES);
    const beta = workspace({ name: 'beta', handler: { command: COPY }, state }, FILES);
    const a = await runCli(['run', '-c', alpha.configPath]);
    expect(a.code, a.stderr).toBe(0);
    expect(outputs(alpha.out)).toEqual(['a.txt.out', 'b.txt.out']);

    const b = await runCli(['run', '-c', beta.configPath]);
    expect(b.code).toBe(78);
    expect(b.stderr).toMatch(/state\.schema/);
    expect(b.stderr).toMatch(/name/);
    expect(b.stderr).toContain('job "alpha"');
    expect(outputs(beta.out)).toEqual([]);
    const s = await runCli(['status', '--json', '-c', beta.configPath]);
    expect(s.code).toBe(78);
    expect(s.stderr).toContain('job "alpha"');

    // Each job on its own schema works.
    const own = workspace({ name: 'beta', handler: { command: COPY }, state: { postgres: pg.url, schema: 'beta' } }, FILES);
    const c = await runCli(['run', '-c', own.configPath]);
    expect(c.code, c.stderr).toBe(0);
    expect(outputs(own.out)).toEqual(['a.txt.out', 'b.txt.out']);
  });

  it('a schema with no job recorded (from before) is adopted by the first job that opens it', async () => {
    const unowned = await openPostgresLedger({ url: pg.url, schema: 'old' }); // opened without a job: nothing recorded
    const ids = await unowned.discover([{ id: 'a.txt' }], { runId: 'r', now: 1 });
    await unowned.complete(await unowned.claim(ids, { owner: 'o', runId: 'r', now: 1, leaseMs: 1 }), 2);
    await unowned.close();
    const gamma = workspace({ name: 'gamma', handler: { command: COPY }, state: { postgres: pg.url, schema: 'old' } }, FILES);
    const r = await runCli(['run', '-c', gamma.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(outputs(gamma.out)).toEqual(['b.txt.out']); // a.txt was done already: the same ledger
    const delta = workspace({ name: 'delta', handler: { command: COPY }, state: { postgres: pg.url, schema: 'old' } }, FILES);
    const d = await runCli(['run', '-c', delta.configPath]);
    expect(d.code).toBe(78);
    expect(d.stderr).toContain('job "gamma"');
  });

  it('requeue and dead-letter retry on a schema with no job recorded: exit 1, nothing changed, not adopted (before: theirs, and the job it was was refused)', async () => {
    const unowned = await openPostgresLedger({ url: pg.url, schema: 'unnamed' });
    const ids = await unowned.discover([{ id: 'a.txt' }], { runId: 'r', now: 1 });
    await unowned.complete(await unowned.claim(ids, { owner: 'o', runId: 'r', now: 1, leaseMs: 1 }), 2);
    await unowned.close();
    const eps = workspace({ name: 'epsilon', handler: { command: COPY }, state: { postgres: pg.url, schema: 'unnamed' } }, FILES);
    for (const args of [['requeue', '--all'], ['dead-letter', 'retry', '--all']]) {
      const r = await runCli([...args, '-c', eps.configPath]);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(1);
      expect(r.stderr).toContain('no job is recorded');
    }
    const zeta = workspace({ name: 'zeta', handler: { command: COPY }, state: { postgres: pg.url, schema: 'unnamed' } }, FILES);
    const z = await runCli(['run', '-c', zeta.configPath]);
    expect(z.code, z.stderr).toBe(0);
    expect(outputs(zeta.out)).toEqual(['b.txt.out']); // a.txt still done: the requeue moved nothing
  });
});
