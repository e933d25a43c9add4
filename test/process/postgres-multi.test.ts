import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresLedger } from '../../src/ledger/postgres/index.js';
import { TEMP_DIR_NAME } from '../../src/runner/output-name.js';
import { OutputStore } from '../../src/runner/output.js';
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

describe('temp files when many runs share an output directory', () => {
  it("each run has its own temp directory; prepare() removes only other runs' stale ones", async () => {
    const out = path.join(tmpdir(), `cronsafe-shared-out-${process.pid}-${Date.now()}`);
    const root = path.join(out, TEMP_DIR_NAME);
    const old = new Date(Date.now() - 10 * 60_000);
    for (const [name, when] of [['dead-run', old], ['live-run', new Date()]] as const) {
      mkdirSync(path.join(root, name), { recursive: true });
      writeFileSync(path.join(root, name, 'x.tmp'), 'partial');
      utimesSync(path.join(root, name, 'x.tmp'), when, when);
      utimesSync(path.join(root, name), when, when);
    }
    const store = new OutputStore(out, { run: 'host:42:run/1', staleAfterMs: 60_000 });
    await store.prepare();
    expect(readdirSync(root).sort()).toEqual(['host_42_run_1', 'live-run']);
    // Its temp paths are inside its own directory, and commit works from there.
    const temp = store.tempPathFor('a/b', 1);
    expect(path.dirname(path.dirname(temp))).toBe(path.join(root, 'host_42_run_1'));
    store.makeAttemptDir(temp);
    writeFileSync(temp, 'whole');
    expect(await store.commit(temp, 'a/b')).toBe(true);
    expect(readFileSync(path.join(out, 'a/b.out'), 'utf8')).toBe('whole');
    // Another run judged our idle directory stale and removed it: the next attempt recreates it.
    const idle = new OutputStore(out, { run: 'idle', staleAfterMs: 1 });
    await idle.prepare();
    rmSync(idle.tempDir, { recursive: true });
    await new Promise((r) => setTimeout(r, 5));
    expect(existsSync(path.dirname(path.dirname(idle.tempPathFor('c', 1))))).toBe(true);
    rmSync(out, { recursive: true, force: true, maxRetries: 20, retryDelay: 5 });
  });
});

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: many runner processes on one backlog', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('a backlog smaller than one scan batch spreads over the pods of the pass', async () => {
    const url = await server.createDatabase('spread');
    const files = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`s-${i}.txt`, String(i)]));
    const ws = workspace(
      { handler: { module: 'handler.mjs' }, state: { postgres: url, schema: 'spread' }, concurrency: 1, queueSize: 2, log: { level: 'info' } },
      files,
    );
    // Each attempt says which process runs it, and the first ones wait (30 s at most) until
    // both processes have started one: b's start-up (seconds on a loaded machine) is not raced
    // against a's 12 x 300 ms. Were the backlog claimed by a alone, b starts none: a goes on
    // after the 30 s, and the writers below are a alone.
    const started = path.join(ws.dir, 'started');
    mkdirSync(started);
    writeFileSync(
      path.join(ws.dir, 'handler.mjs'),
      `import { readdirSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
const started = ${JSON.stringify(started)};
export default async function (item, ctx) {
  writeFileSync(started + '/' + process.pid, '');
  for (const until = Date.now() + 30_000; readdirSync(started).length < 2 && Date.now() < until; ) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, 300));
  await writeFile(ctx.outputPath, String(process.pid));
}
`,
    );
    const env = { CRONSAFE_RUN_GROUP: 'spread-job' };
    const a = spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 60_000 });
    await a.waitFor((l) => l.msg === 'run started', 30_000);
    const b = spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 60_000 });
    expect((await a.exited).code, a.stderr()).toBe(0);
    expect((await b.exited).code, b.stderr()).toBe(0);
    const writers = new Set(Object.keys(files).map((id) => readFileSync(path.join(ws.out, `${id}.out`), 'utf8')));
    expect(writers).toEqual(new Set([String(a.child.pid), String(b.child.pid)]));
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
        // retry: the defaults users get (a kill charges only what was running)
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
