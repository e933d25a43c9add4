import { fileURLToPath } from 'node:url';
// Interleaved A/B of cronsafe builds on ONE PostgreSQL server (fsync on, pg_stat_statements):
// per run a fresh schema, P processes of one run group over N empty files; per item: server CPU,
// statement execution, node CPU (all processes), statements; pass items/s.
//   AB_CLIS=base=/x/dist/cli.js,new=/y/dist/cli.js AB_ORDER=base,new,new,base AB_P=1 N=20000 node ab.mjs
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
const WT = fileURLToPath(new URL('../..', import.meta.url)).replace(/\/$/, '');
const { makeTree, loadavg } = await import(WT + '/bench/lib.mjs');
const { serverCpuSec, startServer, writePgConfig } = await import(WT + '/bench/pg-lib.mjs');
const { binNodeFlags, run } = await import(WT + '/bench/rss.mjs');
const N = Number(process.env.N ?? 20000);
const P = Number(process.env.AB_P ?? 1);
const clis = Object.fromEntries(process.env.AB_CLIS.split(',').map((s) => s.split('=')));
const order = (process.env.AB_ORDER ?? 'base,new,new,base').split(',');
const extraFlags = (process.env.AB_NODE_FLAGS ?? '').split(' ').filter(Boolean);
const root = mkdtempSync(path.join(os.tmpdir(), 'pgt2-ab-'));
const server = await startServer(['fsync=on', 'shared_preload_libraries=pg_stat_statements', 'pg_stat_statements.track=all', ...(process.env.AB_SERVER ?? '').split(' ').filter(Boolean)]);
const res = {};
try {
  const url = server.database('ab');
  server.psql('CREATE EXTENSION pg_stat_statements', 'ab');
  const src = path.join(root, 'src');
  makeTree(src, N);
  let k = 0;
  for (const name of order) {
    const cli = clis[name];
    const schema = `ab_${name}_${k++}`;
    const cfg = writePgConfig(root, src, { postgres: url, schema }, { extra: ['concurrency: 8'] });
    const warmRoot = path.join(root, `warm${k}`);
    mkdirSync(path.join(warmRoot, 'src'), { recursive: true });
    const warm = await run([process.execPath, cli, 'run', '-c', writePgConfig(warmRoot, path.join(warmRoot, 'src'), { postgres: url, schema }, { extra: ['concurrency: 8'] })], 60_000);
    if (warm.code !== 0) throw new Error(warm.stderr);
    server.psql('SELECT pg_stat_statements_reset()', 'ab');
    await new Promise((r) => setTimeout(r, 300));
    const cpu0 = serverCpuSec(server);
    const l0 = loadavg()[0];
    const argv = ['/usr/bin/time', '-f', 'BENCH_CPU=%U %S', process.execPath, ...binNodeFlags(), ...extraFlags, cli, 'run', '-c', cfg];
    const runs = await Promise.all(Array.from({ length: P }, () => run(argv, 600_000, { env: { ...process.env, CRONSAFE_RUN_GROUP: schema } })));
    await new Promise((r) => setTimeout(r, 700));
    const cpu = serverCpuSec(server) - cpu0;
    let nodeCpu = 0; let t0 = Infinity; let t1 = 0; let done = 0;
    for (const r of runs) {
      if (r.code !== 0) throw new Error(`exit ${r.code}: ${r.stderr.slice(-1500)}`);
      const [u, s] = /BENCH_CPU=([\d.]+) ([\d.]+)/.exec(r.stderr).slice(1).map(Number); nodeCpu += u + s;
      const lines = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
      t0 = Math.min(t0, Date.parse(lines.find((l) => l.msg === 'run started').time));
      const fin = lines.find((l) => l.msg === 'run finished'); t1 = Math.max(t1, Date.parse(fin.time)); done += fin.counts.succeeded;
    }
    if (done !== N) throw new Error(`done ${done}`);
    const [calls, execMs] = server.psql(`SELECT sum(calls), sum(total_exec_time) FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'ab')`, 'ab').split('|').map(Number);
    if (process.env.AB_STMTS) console.log(server.psql(`SELECT calls, plans, round(total_plan_time::numeric,1), round(total_exec_time::numeric, 1), regexp_replace(left(query, 60), '\\s+', ' ', 'g') FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'ab') ORDER BY total_exec_time DESC LIMIT 8`, 'ab'));
    const row = { ips: Math.round((N * 1000) / (t1 - t0)), srvUs: +((cpu * 1e6) / N).toFixed(1), execUs: +((execMs * 1000) / N).toFixed(1), nodeUs: +((nodeCpu * 1e6) / N).toFixed(1), stmts: +(calls / N).toFixed(4), load: l0 };
    (res[name] ??= []).push(row);
    console.log(name, JSON.stringify(row));
  }
  for (const [n, rows] of Object.entries(res)) {
    const med = (k) => { const v = rows.map((r) => r[k]).sort((a, b) => a - b); return v[Math.floor((v.length - 1) / 2)]; };
    console.log(`${n}: items/s ${rows.map((r) => r.ips).join(' / ')}; server CPU us ${rows.map((r) => r.srvUs).join(' / ')}; exec us ${rows.map((r) => r.execUs).join(' / ')}; node CPU us ${rows.map((r) => r.nodeUs).join(' / ')}; stmts ${rows.map((r) => r.stmts).join(' / ')} (lower medians ${med('ips')} ${med('srvUs')} ${med('execUs')} ${med('nodeUs')})`);
  }
  console.log('load', loadavg().join(' '));
} finally {
  server.stop();
  rmSync(root, { recursive: true, force: true });
}
