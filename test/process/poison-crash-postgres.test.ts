/**
 * poison-crash.test.ts on PostgreSQL (issue 9, item 3): an item that kills the process
 * every time, beside good items, with the defaults users get (concurrency, maxAttempts).
 * It must end dead after retry.maxAttempts runs, and the good items that happened to be in
 * flight with it must not: on PostgreSQL a dead pod's claims are charged when their lease
 * expires, and before the fix the same few good items ran beside the poison item after
 * every death, were charged with it every time and were dead-lettered with it.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresLedger } from '../../src/ledger/postgres/index.js';
import { FIXTURES, runCli, spawnCli, workspace, type Running } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

const POISON_MODULE = path.join(FIXTURES, 'process/crash-on-poison-module.mjs');
// A short lease, so that a dead pod's claims are taken over in seconds (docs/postgres.md:
// keep it short with PostgreSQL); concurrency and retry are the defaults.
const LEASE = { seconds: 4, renewSeconds: 1 };

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: an item that kills the process every time, with the default retry settings', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  /** Wait until every claim left by a killed run has expired (what frees it on PostgreSQL). */
  const leasesExpired = async (db: string, schema: string): Promise<void> => {
    const [row] = await server.admin<{ t: string }>(`SELECT coalesce(max(lease_until), 0) AS t FROM ${schema}.items WHERE state = 'claimed'`, [], db);
    const last = Number(row?.t ?? 0);
    await until(() => Date.now() > last + 50, 'the killed run’s leases to expire', 30_000);
  };

  const files: Record<string, string> = { 'poison.txt': 'x' };
  for (let i = 0; i < 11; i++) files[`good-${String(i).padStart(2, '0')}.txt`] = `${i}`;
  const starts = (log: string): string[] => readFileSync(log, 'utf8').trim().split('\n');

  const expectOnlyPoisonDead = async (url: string, schema: string, log: string, output: string): Promise<void> => {
    // Its last attempt died with its pod: the run that reclaimed it dead-lettered it, and said
    // so by name, as a pass does (before, only a count of reclaimed claims).
    const deadLines = output.split('\n').filter((l) => l.includes('item dead-lettered'));
    expect(deadLines, output).toHaveLength(1);
    expect(JSON.parse(deadLines[0] ?? '{}')).toMatchObject({ itemId: 'poison.txt', error: expect.stringContaining('attempt 5 abandoned') });
    const ledger = await openPostgresLedger({ url, schema });
    try {
      expect(starts(log).filter((id) => id === 'poison.txt')).toHaveLength(5);
      expect(await ledger.get('poison.txt')).toMatchObject({ state: 'dead', attempts: 5 });
      for (const id of Object.keys(files).filter((f) => f !== 'poison.txt')) {
        expect((await ledger.get(id))?.state, `${id} (started ${starts(log).filter((s) => s === id).length} times)`).toBe('done');
      }
    } finally {
      await ledger.close();
    }
  };

  it('one pod per run: the poison item is dead after 5 runs, the good items beside it are done', async () => {
    const url = await server.createDatabase('poison1');
    const ws = workspace({ handler: { module: POISON_MODULE }, state: { postgres: url, schema: 'poison' }, lease: LEASE }, files);
    const log = path.join(ws.dir, 'invocations.log');
    let last: Awaited<ReturnType<typeof runCli>> | undefined;
    let output = '';
    for (let runs = 0; runs < 12; runs++) {
      last = await runCli(['run', '-c', ws.configPath], { env: { INVOCATIONS: log }, timeoutMs: 60_000 });
      output += last.stdout + last.stderr;
      if (last.signal === null) break;
      expect(last.signal, last.stderr).toBe('SIGKILL');
      await leasesExpired('poison1', 'poison');
    }
    expect(last?.code, last?.stderr).toBe(0);
    await expectOnlyPoisonDead(url, 'poison', log, output);
  }, 300_000);

  it('two pods of one run group: the sibling that takes the poison item over dies too; good items still end done', async () => {
    const url = await server.createDatabase('poison2');
    const ws = workspace({ handler: { module: POISON_MODULE }, state: { postgres: url, schema: 'poison' }, lease: LEASE }, files);
    const log = path.join(ws.dir, 'invocations.log');
    let clean = false;
    let output = '';
    for (let pass = 0; pass < 12 && !clean; pass++) {
      const pods: Running[] = [0, 1].map(() => spawnCli(['run', '-c', ws.configPath], { env: { INVOCATIONS: log, CRONSAFE_RUN_GROUP: `pass-${pass}` }, timeoutMs: 90_000 }));
      const exits = await Promise.all(pods.map((p) => p.exited));
      for (const p of pods) output += `${p.stdout()}\n${p.stderr()}\n`;
      for (const [i, e] of exits.entries()) if (e.signal === null) expect(e.code, pods[i]!.stderr()).toBe(0);
      clean = exits.every((e) => e.signal === null);
      await leasesExpired('poison2', 'poison');
    }
    expect(clean, 'a pass with no pod killed').toBe(true);
    await expectOnlyPoisonDead(url, 'poison', log, output);
  }, 400_000);
});
