import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresLedger } from '../../src/ledger/postgres/index.js';
import { finished, runCli, spawnCli, workspace, type Running, type Workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

const ITEMS = 1200;
const LEASE = { seconds: 3, renewSeconds: 1 };

/** Copies the item to its output, slowly enough that the run is mid-pass when the database goes. */
const HANDLER = `import { readFile, writeFile } from 'node:fs/promises';
export default async function copy(item, ctx) {
  const data = await readFile(item.path);
  await new Promise((r) => setTimeout(r, 15));
  await writeFile(ctx.outputPath, Buffer.concat([data, Buffer.from('\\n--footer ' + data.length + '\\n')]));
}
`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL restarts and outages mid-run', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  async function setup(schema: string): Promise<{ ws: Workspace; files: Record<string, Buffer>; url: string }> {
    const url = await server.createDatabase(schema);
    const files: Record<string, Buffer> = {};
    for (let i = 0; i < ITEMS; i++) files[`d${i % 5}/i${i}.bin`] = randomBytes(20 + ((i * 31) % 500));
    const ws = workspace(
      {
        handler: { module: 'handler.mjs' },
        state: { postgres: url, schema },
        concurrency: 4,
        lease: LEASE,
        // retry: the defaults users get (a database restart is not the items' fault)
        log: { level: 'info' },
      },
      files,
    );
    writeFileSync(path.join(ws.dir, 'handler.mjs'), HANDLER);
    return { ws, files, url };
  }

  /** After the disruption: runs (each after a lease, so killed claims expire) until all is done. */
  async function finishAndCheck(ws: Workspace, files: Record<string, Buffer>, url: string, schema: string): Promise<void> {
    const ledger = await openPostgresLedger({ url, schema });
    try {
      for (let round = 0; round < 4 && (await ledger.counts()).done < ITEMS; round++) {
        await sleep(LEASE.seconds * 1000 + 500);
        const r = await runCli(['run', '-c', ws.configPath], { env: { JOB_NAME: `after-${round}` }, timeoutMs: 60_000 });
        expect(r.code, r.stderr).toBe(0);
      }
      expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: ITEMS, dead: 0 });
      expect((await ledger.totals()).itemsDone).toBe(ITEMS); // each completion applied once
      for (const [id, input] of Object.entries(files)) {
        const out = readFileSync(path.join(ws.out, `${id}.out`));
        expect(out.equals(Buffer.concat([input, Buffer.from(`\n--footer ${input.length}\n`)])), `output of ${id}`).toBe(true);
      }
    } finally {
      await ledger.close();
    }
  }

  const waitDone = async (url: string, schema: string, atLeast: number): Promise<void> => {
    const ledger = await openPostgresLedger({ url, schema });
    try {
      while ((await ledger.counts()).done < atLeast) await sleep(50);
    } finally {
      await ledger.close();
    }
  };

  it('pg_ctl restart -m fast: the runs ride through (or fail with exit 1), and nothing is lost', async () => {
    const { ws, files, url } = await setup('restart');
    const runs: Running[] = [0, 1].map(() => spawnCli(['run', '-c', ws.configPath], { env: { JOB_NAME: 'j1' }, timeoutMs: 120_000 }));
    await waitDone(url, 'restart', 200);
    await server.restart();
    const exits = await Promise.all(runs.map((r) => r.exited));
    for (const [i, e] of exits.entries()) {
      expect([0, 1, 75], `${JSON.stringify(e)}\n${runs[i]!.stderr()}`).toContain(e.code);
    }
    // The pool and the lock both came back: at least one run saw the outage and carried on.
    const lines = runs.flatMap((r) => r.lines);
    expect(lines.some((l) => l.msg === 'run lock taken again')).toBe(true);
    expect(runs.some((r) => finished(r)?.outcome === 'completed')).toBe(true);
    await finishAndCheck(ws, files, url, 'restart');
  }, 150_000);

  it('a database server crash (pg_ctl restart -m immediate): what it forgets is done again, nothing is lost or charged twice', async () => {
    // Claims, the completions written with them and discoveries commit asynchronously: a
    // crash forgets the last of them (docs/postgres.md, "What a database crash can lose").
    const { ws, files, url } = await setup('crash');
    const runs: Running[] = [0, 1].map(() => spawnCli(['run', '-c', ws.configPath], { env: { JOB_NAME: 'j-crash' }, timeoutMs: 120_000 }));
    await waitDone(url, 'crash', 200);
    await server.crash();
    const exits = await Promise.all(runs.map((r) => r.exited));
    for (const [i, e] of exits.entries()) {
      expect([0, 1, 75], `${JSON.stringify(e)}\n${runs[i]!.stderr()}`).toContain(e.code);
    }
    // A pod never took an item it held again (a forgotten claim is pending once more).
    const lines = runs.flatMap((r) => r.lines);
    expect(lines.filter((l) => /bug:/.test(JSON.stringify(l)))).toEqual([]);
    await finishAndCheck(ws, files, url, 'crash');
    const ledger = await openPostgresLedger({ url, schema: 'crash' });
    try {
      // Forgotten claims cost no attempt; a pod killed by nothing here charged none either,
      // so an item is charged at most once more than its completed attempt (a run that
      // failed on the outage and left its claims to expire).
      const [row] = await server.admin<{ n: number }>(`SELECT max(attempts - released)::int AS n FROM crash.items`, [], 'crash');
      expect(row?.n).toBeLessThanOrEqual(2);
    } finally {
      await ledger.close();
    }
  }, 200_000);

  it('a database gone for longer than the retry budget: the run stops with exit 1, the next run finishes', async () => {
    const { ws, files, url } = await setup('outage');
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    await waitDone(url, 'outage', 200);
    await server.halt();
    const haltedAt = Date.now();
    let exit: { code: number | null; signal: NodeJS.Signals | null };
    try {
      exit = await run.exited;
    } finally {
      await server.start();
    }
    expect(exit.code, run.stderr()).toBe(1);
    expect(finished(run)?.outcome).toBe('failed');
    // Retries are bounded (~30 s), and after giving up once the drain does not wait again per write.
    expect(Date.now() - haltedAt).toBeLessThan(50_000);
    const err = run.lines.find((l) => l.msg === 'ledger write failed; stopping the pass' || l.msg === 'scan or claim failed; stopping the pass');
    expect(JSON.stringify(err)).toMatch(/gave up after \d+ attempt\(s\).*127\.0\.0\.1:\d+\/outage/);
    // The retries before it were said (throttled: a few lines over ~30 s, not one per try),
    // naming the server.
    const retries = run.lines.filter((l) => l.msg === 'state store: a transient error; retrying');
    expect(retries.length).toBeGreaterThanOrEqual(1);
    expect(retries.length).toBeLessThanOrEqual(5);
    expect(JSON.stringify(retries[0])).toMatch(/127\.0\.0\.1:\d+\/outage/);
    await finishAndCheck(ws, files, url, 'outage');
  }, 150_000);
});
