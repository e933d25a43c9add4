// PROTOTYPE bench (issue 11 design, not part of `npm run bench`): the claim-at-the-slot
// model (bench/proto/claim-at-slot.mjs) in several variants, P pods of one pass, beside
// graphile-worker on the same fsync-on server in the same run.
// Each configuration runs BENCH_PROTO_REPS times (default 3), interleaved with the others, and
// the table shows the median (and the range): single runs on a shared machine vary by 2x.
//   node bench/proto/run.mjs     env BENCH_PROTO_ITEMS (default 20000), BENCH_PROTO_REPS,
//                                BENCH_PROTO_ONLY (variant letters to run, e.g. "DH")
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { envInt, environment, fmtInt, loadavg, ROOT, table } from '../lib.mjs';
import { serverCpuSec, startServer } from '../pg-lib.mjs';
import { run } from '../rss.mjs';

const ITEMS = envInt('BENCH_PROTO_ITEMS', 20_000);
const REPS = envInt('BENCH_PROTO_REPS', 3);
const ONLY = process.env.BENCH_PROTO_ONLY ?? '';
const HERE = path.dirname(fileURLToPath(import.meta.url));
const log = (msg) => process.stderr.write(`[bench:proto] ${msg}\n`);

// D is the design (notes/pg-design.md); the others each change one thing from it.
const D = { claimCommit: 'off', window: 'all', analyzeAfter: 1024 };
const VARIANTS = [
  ['A: claims sync commit, BEGIN/claim/COMMIT', { ...D, claimCommit: 'on', claimTx: true }, [1]],
  ['B: claims sync commit, one statement', { ...D, claimCommit: 'on' }, [1]],
  ['C: claims BEGIN/SET LOCAL synchronous_commit=off/claim/COMMIT', { ...D, claimCommit: 'local' }, [1]],
  ['D: claims async session, one statement (the design)', D, [1, 2, 4]],
  ['E: D without the ANALYZE after 1,024 new rows', { ...D, analyzeAfter: 0 }, [1, 4]],
  ['F: D offering only k candidates per claim', { ...D, window: 'k' }, [4]],
  ['G: D + complete as BEGIN/UPDATE/bump/COMMIT', { ...D, completeOne: false }, [1]],
  ['H: D + 2 claim connections', { ...D, claimConns: 2 }, [1]],
  ['I: D with unnamed statements (parsed and planned per call)', { ...D, named: false }, [1]],
  ['J: D, every item through the sweep (ORDER BY available_at, id)', { ...D, candidates: false }, [1, 4]],
  ['K: D + 2 claim connections taking at most 4 slots each', { ...D, claimConns: 2, claimMax: 4 }, [1, 2]],
  ['L: D with concurrency 16 (queueSize 64)', { ...D, concurrency: 16, queueSize: 64 }, [1, 2]],
].filter(([name]) => ONLY === '' || ONLY.includes(name[0]));

const result = (r, what) => {
  const line = r.stdout.split('\n').find((l) => l.startsWith('BENCH_RESULT='));
  if (r.code !== 0 || !line) throw new Error(`${what} failed (exit ${r.code ?? r.signal})\n${r.stderr.slice(-3000)}`);
  return JSON.parse(line.slice('BENCH_RESULT='.length));
};

const env = environment();
const server = await startServer(['fsync=on']);
const rows = [];
let db = 0;
try {
  const graphile = async (label) => {
    log(`graphile-worker (${label}) ...`);
    const r = result(await run([process.execPath, path.join(ROOT, 'bench', 'graphile', 'graphile-worker.mjs'), server.database(`gw_${label}`), String(ITEMS), '8'], 600_000), 'graphile');
    return (ITEMS * 1000) / r.processMs;
  };
  const gw = [await graphile('first')];
  const configs = VARIANTS.flatMap(([name, opts, ps]) => ps.map((p) => ({ name, opts, p, runs: [] })));
  for (let rep = 1; rep <= REPS; rep++) {
    for (const cfg of configs) {
      const { name, opts, p } = cfg;
      const url = server.database(`proto_${++db}`);
      const mk = await run([process.execPath, '-e', `const { openPostgresLedger } = await import(${JSON.stringify(path.join(ROOT, 'dist/ledger/postgres/index.js'))}); const l = await openPostgresLedger({ url: process.argv[1], schema: 'p' }); await l.close();`, url], 60_000);
      if (mk.code !== 0) throw new Error(mk.stderr);
      log(`rep ${rep}/${REPS}: ${name}, ${p} pod(s) ...`);
      const cpu0 = serverCpuSec(server);
      const t0 = performance.now();
      const outs = await Promise.all(Array.from({ length: p }, () => run([process.execPath, path.join(HERE, 'claim-at-slot.mjs'), url, 'p', 'pass-1', String(ITEMS), JSON.stringify(opts)], 600_000)));
      const ms = performance.now() - t0;
      const serverCpu = serverCpuSec(server) - cpu0;
      let rs;
      try {
        rs = outs.map((o) => result(o, name));
      } catch (err) {
        log(String(err).slice(0, 2000));
        cfg.failed = true;
        continue;
      }
      const done = rs.reduce((s, r) => s + r.completed, 0);
      if (done !== ITEMS) throw new Error(`${name}: ${done} completed, expected ${ITEMS}`);
      const sum = (k) => rs.reduce((s, r) => s + r[k], 0);
      cfg.runs.push({
        ms,
        perSec: (ITEMS * 1000) / ms,
        rttPerItem: sum('roundTrips') / ITEMS,
        itemsPerClaim: ITEMS / sum('claims'),
        cpuUsPerItem: (sum('cpuMs') * 1000) / ITEMS,
        serverUsPerItem: (serverCpu * 1e6) / ITEMS,
        perPod: rs.map((r) => r.completed),
      });
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  for (const cfg of configs) {
    if (cfg.runs.length === 0) continue;
    const mid = median(cfg.runs.map((r) => r.perSec));
    const m = cfg.runs.find((r) => r.perSec === mid);
    rows.push({ name: cfg.name + (cfg.failed ? ' (a run FAILED)' : ''), p: cfg.p, ...m, range: cfg.runs.map((r) => r.perSec) });
  }
  gw.push(await graphile('last'));
  const gwRate = (gw[0] + gw[1]) / 2;
  const out = [
    '',
    `claim-at-the-slot prototype, ${fmtInt(ITEMS)} items, no-op, concurrency 8, queueSize 32 unless noted, median of ${REPS} interleaved runs  ${env.date}`,
    `PostgreSQL ${server.version}, fsync on, stock; load ${env.loadavg.join(' ')} -> ${loadavg().join(' ')}; graphile-worker 0.17.3 processing: ${gw.map(fmtInt).join(' / ')} jobs/s (first / last)`,
    'items/s: first spawn to last exit of the pods (each pod\'s own connect/start-up included, schema made before)',
    '',
    table(
      ['variant', 'pods', 'items/s (median)', 'range', 'vs graphile', 'round trips / item', 'items / claim', 'node CPU us / item', 'server CPU us / item', 'items per pod'],
      rows.map((r) => [
        r.name,
        String(r.p),
        fmtInt(r.perSec),
        `${fmtInt(Math.min(...r.range))}-${fmtInt(Math.max(...r.range))}`,
        `${(r.perSec / gwRate).toFixed(1)}x`,
        r.rttPerItem.toFixed(3),
        r.itemsPerClaim.toFixed(1),
        r.cpuUsPerItem.toFixed(0),
        r.serverUsPerItem.toFixed(0),
        r.perPod.map(fmtInt).join(' / '),
      ]),
    ),
    '',
  ];
  process.stdout.write(`${out.join('\n')}\n`);
} finally {
  server.stop();
}
