import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresLedger } from '../../src/ledger/postgres/index.js';
import { spawnCli, workspace, type Running } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

const ITEMS = 3000;
const PROCESSES = 4;

/**
 * The handler: copies the item to its output in chunks (a SIGKILL can land mid-write),
 * then a footer naming the process and attempt that wrote it, so the test can check that
 * the output on disk came from the attempt the ledger recorded as the completion.
 */
const HANDLER = `import { open, readFile } from 'node:fs/promises';
export default async function copy(item, ctx) {
  const data = await readFile(item.path);
  await new Promise((r) => setTimeout(r, 10 + Math.random() * 30));
  const fh = await open(ctx.outputPath, 'w');
  try {
    for (let i = 0; i < data.length; i += 256) await fh.write(data.subarray(i, i + 256));
    await fh.write('\\n--footer ' + data.length + ' pid=' + process.pid + ' attempt=' + ctx.attempt + '\\n');
  } finally {
    await fh.close();
  }
}
`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: many runner processes on one backlog', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('with random SIGKILLs and restarts: every item done once, by the attempt whose output is on disk', async () => {
    const url = await server.createDatabase('multi');
    const files: Record<string, Buffer> = {};
    for (let i = 0; i < ITEMS; i++) files[`part-${i % 13}/item-${i}.bin`] = randomBytes(50 + ((i * 53) % 2000));
    const ws = workspace(
      {
        handler: { module: 'handler.mjs' },
        state: { postgres: url, schema: 'multi' },
        concurrency: 4,
        lease: { seconds: 4, renewSeconds: 1 },
        retry: { maxAttempts: 1000, backoffSeconds: 0, backoffMaxSeconds: 0 },
        log: { level: 'info' },
      },
      files,
    );
    writeFileSync(path.join(ws.dir, 'handler.mjs'), HANDLER);
    const env = { CRONSAFE_RUN_GROUP: 'job-1' };
    const spawnRunner = (): Running => spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 170_000 });
    const ledger = await openPostgresLedger({ url, schema: 'multi' });

    try {
      const running = new Set<Running>();
      const exits: { code: number | null; signal: string | null }[] = [];
      const launch = () => {
        const r = spawnRunner();
        running.add(r);
        void r.exited.then((e) => {
          running.delete(r);
          exits.push(e);
        });
        return r;
      };
      for (let i = 0; i < PROCESSES; i++) launch();
      await Promise.all([...running].map((r) => r.waitFor((l) => l.msg === 'run started', 30_000)));

      // Chaos: SIGKILL a random runner every half second or so, and start a new one.
      let kills = 0;
      while (kills < 10 && (await ledger.counts()).done < ITEMS * 0.9) {
        await sleep(300 + Math.random() * 500);
        const victims = [...running];
        const victim = victims[Math.floor(Math.random() * victims.length)];
        if (victim && victim.child.exitCode === null) {
          victim.child.kill('SIGKILL');
          kills++;
        }
        while (running.size < PROCESSES) launch();
      }
      // Let the survivors finish, then start runs until nothing is left: a run reclaims
      // the claims of killed runners once their lease (4 s) has expired.
      await Promise.all([...running].map((r) => r.exited));
      for (let round = 0; round < 6 && (await ledger.counts()).done < ITEMS; round++) {
        await sleep(4500);
        const r = launch();
        const e = await r.exited;
        expect(e.code, r.stderr()).toBe(0);
      }

      expect(kills, 'runners were really killed mid-pass').toBeGreaterThanOrEqual(3);
      expect(exits.filter((e) => e.signal === null).every((e) => e.code === 0), JSON.stringify(exits)).toBe(true);
      expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: ITEMS, dead: 0 });
      // Each item completed exactly once: a second completion would be fenced, not counted.
      expect((await ledger.totals()).itemsDone).toBe(ITEMS);
      expect((await ledger.attemptTotals()).succeeded).toBe(ITEMS);

      const rows = await server.admin<{ id: string; done_by: string; attempts: number }>(
        'SELECT id, done_by, attempts FROM multi.items',
        [],
        'multi',
      );
      const byId = new Map(rows.map((r) => [r.id, r]));
      const completers = new Set<string>();
      for (const [id, input] of Object.entries(files)) {
        const out = readFileSync(path.join(ws.out, `${id}.out`));
        const footerAt = out.lastIndexOf('\n--footer ');
        expect(out.subarray(0, footerAt).equals(input), `output of ${id} is whole`).toBe(true);
        const m = /^\n--footer (\d+) pid=(\d+) attempt=(\d+)\n$/.exec(out.subarray(footerAt).toString());
        const row = byId.get(id);
        expect(m?.[1]).toBe(String(input.length));
        // The output on disk is the completing attempt's: same process, same attempt.
        expect(row?.done_by.split(':')[1], `completer of ${id}`).toBe(m?.[2]);
        expect(row?.attempts).toBe(Number(m?.[3]));
        completers.add(row!.done_by);
      }
      expect(completers.size, 'several runners shared the pass').toBeGreaterThanOrEqual(PROCESSES);
    } finally {
      await ledger.close();
    }
  }, 180_000);
});
