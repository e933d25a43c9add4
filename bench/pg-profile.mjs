// Where the time goes for ONE `cronsafe run` process on PostgreSQL (issue 11): a server with
// stock settings, fsync on and pg_stat_statements; N empty files, the no-op module handler,
// concurrency 8. Reports statements (= round trips: node-postgres never pipelines), commits,
// WAL flushes, server CPU and node CPU, per item, and the statements by total time.
//   npm run build && node bench/pg-profile.mjs          (env BENCH_PROFILE_ITEMS, default 20000;
//                                                        BENCH_PROFILE_FSYNC=off for a flush-free server)
// Not part of `npm run bench`: a diagnostic for docs and design notes.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { envInt, fmtInt, loadavg, makeTree, table } from './lib.mjs';
import { CLI, serverCpuSec, startServer, writePgConfig } from './pg-lib.mjs';
import { binNodeFlags, run } from './rss.mjs';

const ITEMS = envInt('BENCH_PROFILE_ITEMS', 20_000);
const FSYNC = process.env.BENCH_PROFILE_FSYNC ?? 'on';
const log = (msg) => process.stderr.write(`[bench:pg-profile] ${msg}\n`);
const root = mkdtempSync(path.join(os.tmpdir(), 'cronsafe-bench-prof-'));
const server = await startServer([`fsync=${FSYNC}`, 'shared_preload_libraries=pg_stat_statements', 'pg_stat_statements.track=all', 'track_wal_io_timing=on']);
try {
  const url = server.database('prof');
  server.psql('CREATE EXTENSION pg_stat_statements', 'prof');
  const src = path.join(root, 'src');
  log(`creating ${fmtInt(ITEMS)} empty files ...`);
  makeTree(src, ITEMS);
  const configFile = writePgConfig(root, src, { postgres: url, schema: 'prof' }, { extra: ['concurrency: 8'] });
  // Create the schema first (migrations are not what we measure): a run over an empty
  // directory (status opens read-only and refuses a schema no run has created).
  const warmRoot = path.join(root, 'warm');
  mkdirSync(path.join(warmRoot, 'src'), { recursive: true });
  const warmConfig = writePgConfig(warmRoot, path.join(warmRoot, 'src'), { postgres: url, schema: 'prof' }, { extra: ['concurrency: 8'] });
  const warm = await run([process.execPath, CLI, 'run', '-c', warmConfig], 60_000);
  if (warm.code !== 0) throw new Error(`warm-up run failed: ${warm.stderr}`);
  const stats = () => {
    const [commits, rollbacks] = server.psql(`SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = 'prof'`).split('|').map(Number);
    const [walRecords, walBytes, walSync, walSyncMs, walWrite] = server
      .psql('SELECT wal_records, wal_bytes, wal_sync, wal_sync_time, wal_write FROM pg_stat_wal')
      .split('|')
      .map(Number);
    return { commits, rollbacks, walRecords, walBytes, walSync, walSyncMs, walWrite, cpu: serverCpuSec(server) };
  };
  server.psql('SELECT pg_stat_statements_reset()', 'prof');
  const before = stats();
  const load0 = loadavg();
  log(`cronsafe run, 1 process, ${fmtInt(ITEMS)} items, fsync=${FSYNC} ...`);
  const t0 = performance.now();
  const r = await run(['/usr/bin/time', '-f', 'BENCH_CPU=%U %S', process.execPath, ...binNodeFlags(), CLI, 'run', '-c', configFile], 600_000, {
    env: { ...process.env, CRONSAFE_RUN_GROUP: 'profile' },
  });
  const wallMs = performance.now() - t0;
  if (r.code !== 0) throw new Error(`run failed (${r.code}): ${r.stderr.slice(-2000)}`);
  // Stats are sent by backends at the end of a transaction; give them a moment.
  await new Promise((res) => setTimeout(res, 700));
  const after = stats();
  const [nodeUser, nodeSys] = /BENCH_CPU=([\d.]+) ([\d.]+)/.exec(r.stderr).slice(1).map(Number);
  const fin = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l)).find((l) => l.msg === 'run finished');
  const statements = server
    .psql(
      `SELECT calls, rows, round(total_exec_time::numeric, 1), regexp_replace(left(query, 90), '\\s+', ' ', 'g') FROM pg_stat_statements
       WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'prof') ORDER BY total_exec_time DESC`,
      'prof',
    )
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split('|'));
  const totalCalls = statements.reduce((s, x) => s + Number(x[0]), 0);
  const totalExecMs = statements.reduce((s, x) => s + Number(x[2]), 0);
  const d = (k) => after[k] - before[k];
  const per = (v) => (v / ITEMS).toFixed(4);
  const perUs = (sec) => ((sec * 1e6) / ITEMS).toFixed(1);
  const lines = [
    '',
    `cronsafe, 1 process, ${fmtInt(ITEMS)} items, PostgreSQL ${server.version}, fsync=${FSYNC}; load ${load0.join(' ')} -> ${loadavg().join(' ')}`,
    `wall ${(wallMs / 1000).toFixed(2)} s (${fmtInt((ITEMS * 1000) / wallMs)} items/s); run durationMs ${fin?.durationMs} (${fmtInt((ITEMS * 1000) / fin?.durationMs)} items/s)`,
    '',
    table(
      ['what', 'total', 'per item'],
      [
        ['statements (round trips, incl. BEGIN/COMMIT)', fmtInt(totalCalls), per(totalCalls)],
        ['commits (pg_stat_database)', fmtInt(d('commits')), per(d('commits'))],
        ['WAL flushes (pg_stat_wal.wal_sync)', fmtInt(d('walSync')), per(d('walSync'))],
        ['WAL flush time (ms)', d('walSyncMs').toFixed(0), `${((d('walSyncMs') * 1000) / ITEMS).toFixed(1)} us`],
        ['WAL bytes', fmtInt(d('walBytes')), fmtInt(d('walBytes') / ITEMS)],
        ['server CPU (s)', d('cpu').toFixed(2), `${perUs(d('cpu'))} us`],
        ['server statement execution (s, pg_stat_statements)', (totalExecMs / 1000).toFixed(2), `${((totalExecMs * 1000) / ITEMS).toFixed(1)} us`],
        ['node CPU user+sys (s)', (nodeUser + nodeSys).toFixed(2), `${perUs(nodeUser + nodeSys)} us`],
      ],
    ),
    '',
    table(['calls', 'rows', 'total ms', 'statement'], statements.slice(0, 16)),
    '',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
} finally {
  server.stop();
  rmSync(root, { recursive: true, force: true });
}
