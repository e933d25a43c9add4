// graphile-worker, the comparison for cronsafe on PostgreSQL (bench/pg-graphile.mjs): one
// process that migrates, enqueues N jobs with addJobs, runs them with a no-op task at the
// given concurrency and stock worker settings, and stops once all N succeeded.
//   node bench/graphile/graphile-worker.mjs URL N CONCURRENCY
// Prints one `BENCH_RESULT=<json>` line (times in ms from this process's start).
import { EventEmitter } from 'node:events';
import { Logger, makeWorkerUtils, run, runMigrations } from 'graphile-worker';
import pg from 'pg';

const [url, nArg, concArg] = process.argv.slice(2);
const N = Number(nArg);
const concurrency = Number(concArg);
if (!url || !Number.isInteger(N) || N < 1 || !Number.isInteger(concurrency) || concurrency < 1) {
  throw new Error('usage: graphile-worker.mjs URL N CONCURRENCY');
}
const silent = new Logger(() => () => undefined);
const at = () => performance.now();

const t = { start: at() };
await runMigrations({ connectionString: url, logger: silent });
t.migrated = at();

const utils = await makeWorkerUtils({ connectionString: url, logger: silent });
// Chunks of 5,000: one add_jobs call (one JSON parameter, one transaction) each.
for (let i = 0; i < N; i += 5000) {
  const n = Math.min(5000, N - i);
  await utils.addJobs(Array.from({ length: n }, (_, j) => ({ identifier: 'noop', payload: { i: i + j } })));
}
await utils.release();
t.enqueued = at();

const events = new EventEmitter();
let succeeded = 0;
let failed = 0;
let allDone;
const finished = new Promise((resolve) => (allDone = resolve));
events.on('job:start', () => (t.firstJob ??= at()));
events.on('job:error', () => failed++);
events.on('job:success', () => {
  if (++succeeded === N) {
    t.lastJob = at();
    allDone();
  }
});
t.runStart = at();
const runner = await run({
  connectionString: url,
  concurrency,
  noHandleSignals: true,
  logger: silent,
  events,
  taskList: { noop: async () => undefined },
});
await finished;
await runner.stop();
t.stopped = at();

// graphile-worker deletes a job when it succeeds: none must be left.
const c = new pg.Client({ connectionString: url });
await c.connect();
const { rows } = await c.query('SELECT count(*)::int AS n FROM graphile_worker.jobs');
await c.end();
if (failed > 0 || rows[0].n !== 0) throw new Error(`graphile-worker: ${failed} job errors, ${rows[0].n} jobs left`);

process.stdout.write(
  `BENCH_RESULT=${JSON.stringify({
    jobs: N,
    concurrency,
    migrateMs: t.migrated - t.start,
    enqueueMs: t.enqueued - t.migrated,
    // Processing only: from asking the runner to start to the last job's success.
    processMs: t.lastJob - t.runStart,
    firstToLastMs: t.lastJob - t.firstJob,
    totalMs: t.stopped - t.start,
  })}\n`,
);
