import { fileURLToPath } from 'node:url';
// Server-side micro-bench: the 1-process hot statement (complete 8 + insert 8 claimed) on schema variants.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
const WT = fileURLToPath(new URL('../..', import.meta.url)).replace(/\/$/, '');
const require = createRequire(WT + '/package.json');
const pg = require('pg');
const { startServer } = await import(WT + '/bench/pg-lib.mjs');
const { migrate } = await import(WT + '/dist/ledger/postgres/migrate.js');
const { settleNewQuery } = await import(WT + '/dist/ledger/postgres/claim.js');
const { claimColumns } = await import(WT + '/dist/ledger/postgres/finish.js');
const N = Number(process.env.N ?? 20000);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const variants = JSON.parse(readFileSync(process.argv[2], 'utf8')); // [{name, sql: [..] with %s for schema}]
const server = await startServer(['fsync=on']);
const cpuOf = (pid) => Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]) / 1e9;
try {
  const url = server.database('m');
  const res = {};
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 ? [...variants].reverse() : variants;
    for (const v of order) {
      const schema = `s_${v.name}_${r}`;
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      await c.query('SET synchronous_commit=off; SET enable_seqscan=off; SET enable_hashjoin=off; SET enable_mergejoin=off');
      await migrate((qq) => c.query(qq).then((x) => x.rows), schema);
      for (const s of v.sql ?? []) await c.query(s.replaceAll('%s', `"${schema}"`));
      const pid = (await c.query('SELECT pg_backend_pid() AS p')).rows[0].p;
      const ids = Array.from({ length: N }, (_, i) => `dir/item-${String(i).padStart(7, '0')}.scc`);
      let done = [];
      const cpu0 = cpuOf(pid); const t0 = performance.now();
      for (let i = 0; i < N; i += 8) {
        const part = ids.slice(i, i + 8);
        const fresh = { ids: part, sizes: part.map(() => 0), mtimes: part.map(() => 1.5), ords: part.map((_, k) => k + 1) };
        const qy = settleNewQuery(schema, claimColumns(done), fresh, { owner: 'pod-1', now: 1000 + i, leaseUntil: 99999 }, 'pass-1');
        const rows = (await c.query(qy)).rows;
        done = rows.filter((x) => x.owner === null).map((x) => ({ id: x.id, owner: 'pod-1', attempt: x.attempts }));
      }
      const ms = performance.now() - t0; const cpu = cpuOf(pid) - cpu0;
      const st = (await c.query(`SELECT n_tup_hot_upd, n_tup_upd FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'items'`, [schema])).rows[0];
      (res[v.name] ??= []).push(`${(cpu * 1e6 / N).toFixed(1)}us/${(ms * 1000 / N).toFixed(1)}us`);
      console.log(v.name, 'round', r, 'backend CPU/item', (cpu * 1e6 / N).toFixed(1), 'us; wall/item', (ms * 1000 / N).toFixed(1), 'us; hot', JSON.stringify(st));
      await c.end();
    }
  }
  console.log(JSON.stringify(res));
  console.log('load', readFileSync('/proc/loadavg', 'utf8').trim());
} finally { server.stop(); }
