// PROTOTYPE bench (issue 11 design, not part of `npm run bench`): the claim-at-the-slot
// model (bench/proto/claim-at-slot.mjs) in several variants, P pods of one pass, beside
// graphile-worker on the same fsync-on server in the same run.
//   node bench/proto/run.mjs            env BENCH_PROTO_ITEMS (default 20000)
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { envInt, environment, fmtInt, fmtSec, loadavg, ROOT, table } from '../lib.mjs';
import { startServer } from '../pg-lib.mjs';
import { run } from '../rss.mjs';

const ITEMS = envInt('BENCH_PROTO_ITEMS', 20_000);
const HERE = path.dirname(fileURLToPath(import.meta.url));
const log = (msg) => process.stderr.write(`[bench:proto] ${msg}\n`);

const VARIANTS = [
  ['A: claims sync commit, BEGIN/claim/COMMIT', { claimCommit: 'on', claimTx: true }, [1]],
  ['B: claims sync commit, one statement', { claimCommit: 'on' }, [1]],
  ['C: claims async commit, BEGIN/claim/COMMIT', { claimCommit: 'off', claimTx: true }, [1]],
  ['D: claims async commit, one statement', { claimCommit: 'off' }, [1, 2, 4]],
  ['E: D + complete as BEGIN/UPDATE/bump/COMMIT', { claimCommit: 'off', completeOne: false }, [1]],
  ['F: D + 2 claim connections', { claimCommit: 'off', claimConns: 2 }, [1]],
  ['G: D + the whole channel offered per claim', { claimCommit: 'off', window: 'all' }, [2, 4]],
  ['H: D, no candidates: all by the sweep, ORDER BY available_at, id (today)', { claimCommit: 'off', candidates: false }, [1]],
  ['I: D, no candidates: all by the sweep, ORDER BY available_at', { claimCommit: 'off', candidates: false, sweepOrder: 'available_at' }, [1, 4]],
];

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
    const r = result(await run([process.execPath, path.join(ROOT, 'bench', 'compare', 'graphile-worker.mjs'), server.database(`gw_${label}`), String(ITEMS), '8'], 600_000), 'graphile');
    return (ITEMS * 1000) / r.processMs;
  };
  const gw = [await graphile('first')];
  for (const [name, opts, ps] of VARIANTS) {
    for (const p of ps) {
      const url = server.database(`proto_${++db}`);
      const mk = await run([process.execPath, '-e', `const { openPostgresLedger } = await import(${JSON.stringify(path.join(ROOT, 'dist/ledger/postgres/index.js'))}); const l = await openPostgresLedger({ url: process.argv[1], schema: 'p' }); await l.close();`, url], 60_000);
      if (mk.code !== 0) throw new Error(mk.stderr);
      log(`${name}, ${p} pod(s) ...`);
      const t0 = performance.now();
      const outs = await Promise.all(Array.from({ length: p }, () => run([process.execPath, path.join(HERE, 'claim-at-slot.mjs'), url, 'p', 'pass-1', String(ITEMS), JSON.stringify(opts)], 600_000)));
      const ms = performance.now() - t0;
      let rs;
      try {
        rs = outs.map((o) => result(o, name));
      } catch (err) {
        log(String(err).slice(0, 2000));
        rows.push({ name: `${name} (FAILED)`, p, ms, perSec: 0, rttPerItem: 0, itemsPerClaim: 0, cpuUsPerItem: 0, perPod: [] });
        continue;
      }
      const done = rs.reduce((s, r) => s + r.completed, 0);
      if (done !== ITEMS) throw new Error(`${name}: ${done} completed, expected ${ITEMS}`);
      const rtt = rs.reduce((s, r) => s + r.roundTrips, 0);
      const claims = rs.reduce((s, r) => s + r.claims, 0);
      const cpu = rs.reduce((s, r) => s + r.cpuMs, 0);
      rows.push({ name, p, ms, perSec: (ITEMS * 1000) / ms, rttPerItem: rtt / ITEMS, itemsPerClaim: ITEMS / claims, cpuUsPerItem: (cpu * 1000) / ITEMS, perPod: rs.map((r) => r.completed) });
    }
  }
  gw.push(await graphile('last'));
  const gwRate = (gw[0] + gw[1]) / 2;
  const out = [
    '',
    `claim-at-the-slot prototype, ${fmtInt(ITEMS)} items, no-op, concurrency 8, queueSize 32  ${env.date}`,
    `PostgreSQL ${server.version}, fsync on, stock; load ${env.loadavg.join(' ')} -> ${loadavg().join(' ')}; graphile-worker 0.17.3 processing: ${gw.map(fmtInt).join(' / ')} jobs/s (first / last)`,
    'items/s: first spawn to last exit of the pods (each pod\'s own connect/start-up included, schema made before)',
    '',
    table(
      ['variant', 'pods', 'time', 'items/s', 'vs graphile', 'round trips / item', 'items / claim', 'node CPU us / item', 'items per pod'],
      rows.map((r) => [r.name, String(r.p), fmtSec(r.ms), fmtInt(r.perSec), `${(r.perSec / gwRate).toFixed(1)}x`, r.rttPerItem.toFixed(3), r.itemsPerClaim.toFixed(1), r.cpuUsPerItem.toFixed(0), r.perPod.map(fmtInt).join(' / ')]),
    ),
    '',
  ];
  process.stdout.write(`${out.join('\n')}\n`);
} finally {
  server.stop();
}
