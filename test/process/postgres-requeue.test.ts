import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresLedger } from '../../src/ledger/postgres/index.js';
import { configure, FIXTURES, runCli, spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';
import { invocations } from '../helpers/proc.js';
import { until } from '../helpers/wait.js';

const HELD_COPY = path.join(FIXTURES, 'process/held-copy.sh');

describe.skipIf(PG_SKIP_REASON !== undefined)('cronsafe requeue and plan on a PostgreSQL ledger, while a run is active', () => {
  let server: PgServer;
  let url = '';
  let running: ReturnType<typeof spawnCli> | undefined;
  beforeAll(async () => {
    server = await startPostgres();
    url = await server.createDatabase('requeue');
  });
  afterEach(() => {
    running?.child.kill('SIGKILL');
    running = undefined;
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('requeues by glob around a held claim; plan sees it; every requeued item runs again, nothing is taken for gone', async () => {
    // One slot, which the held item takes: the live pass cannot run the requeued items before
    // plan looks (a pass with a slot free sweeps again every 500 ms and runs them at once).
    const ws = workspace({ concurrency: 1, state: { postgres: url, schema: 'rq' } }, { 'a/1.txt': '1', 'a/2.txt': '2', 'b/1.txt': '3' });
    const log = path.join(ws.dir, 'invocations.log');
    const hold = (id: string) => configure(ws, { handler: { command: ['/bin/sh', HELD_COPY, '{path}', '{output}'], env: { INVOCATIONS: log, HOLD_DIR: ws.dir, HOLD_ID: id } } });
    hold('');
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    writeFileSync(path.join(ws.source, 'a/held.txt'), 'held');
    hold('a/held.txt');
    running = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    await until(() => existsSync(path.join(ws.dir, 'held')), 'the held item to start');

    const r = await runCli(['requeue', '-c', ws.configPath, '--glob', 'a/**', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ dryRun: false, count: 2, first: ['a/1.txt', 'a/2.txt'], notRequeued: [] });
    const named = await runCli(['requeue', '-c', ws.configPath, 'a/held.txt']);
    expect(named.code).toBe(1);
    expect(named.stdout).toContain('a/held.txt: claimed');
    const p = await runCli(['plan', '-c', ws.configPath, '--json']);
    expect(p.code, p.stderr).toBe(0);
    expect(JSON.parse(p.stdout)).toMatchObject({ claimed: { count: 1, first: ['a/held.txt'] }, done: { count: 1, first: ['b/1.txt'] } });

    writeFileSync(path.join(ws.dir, 'release'), '');
    expect((await running.exited).code).toBe(0);
    hold('');
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    expect(Object.fromEntries(invocations(log))).toEqual({ 'a/1.txt': 2, 'a/2.txt': 2, 'b/1.txt': 1, 'a/held.txt': 1 });
    const ledger = await openPostgresLedger({ url, schema: 'rq' });
    expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 4, dead: 0 });
    expect(await ledger.attemptTotals()).toMatchObject({ gone: 0, succeeded: 6 });
    expect((await ledger.totals()).requeued).toBe(2);
    await ledger.close();
  }, 180_000);
});
