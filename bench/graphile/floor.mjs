// The floor for a fenced PostgreSQL queue (bench/pg-graphile.mjs): a bare `pg` loop on one
// connection that claims BATCH rows with FOR UPDATE SKIP LOCKED, "runs" them (no-op) and
// completes them with one fenced UPDATE (owner + attempt), each statement its own commit.
// No runner, no scan, no retries: what the server and one connection can do.
//   node bench/graphile/floor.mjs URL N [BATCH]
// Prints one `BENCH_RESULT=<json>` line.
import pg from 'pg';

const [url, nArg, batchArg = '50'] = process.argv.slice(2);
const N = Number(nArg);
const BATCH = Number(batchArg);
if (!url || !Number.isInteger(N) || N < 1 || !Number.isInteger(BATCH) || BATCH < 1) throw new Error('usage: floor.mjs URL N [BATCH]');

const c = new pg.Client({ connectionString: url });
await c.connect();
// The same row shape and partial index as cronsafe's items table (migration 001), minus
// columns this loop never touches.
await c.query(`CREATE TABLE floor_items (
  id text COLLATE "C" PRIMARY KEY, state text NOT NULL DEFAULT 'pending', attempts integer NOT NULL DEFAULT 0,
  owner text, lease_until bigint, available_at bigint NOT NULL, done_at bigint, updated_at bigint NOT NULL)`);
await c.query(`CREATE INDEX floor_pending_due ON floor_items (available_at, id) WHERE state = 'pending'`);
await c.query(
  `INSERT INTO floor_items (id, available_at, updated_at) SELECT 'd' || lpad((i / 1000)::text, 4, '0') || '/f' || lpad((i % 1000)::text, 4, '0'), 0, 0 FROM generate_series(0, $1 - 1) AS i`,
  [N],
);
await c.query('VACUUM ANALYZE floor_items');

const owner = `floor:${process.pid}`;
const claim = {
  name: 'floor-claim',
  text: `WITH c AS (SELECT id FROM floor_items WHERE state = 'pending' AND available_at <= $2 ORDER BY available_at, id LIMIT $3 FOR UPDATE SKIP LOCKED)
UPDATE floor_items AS i SET state = 'claimed', owner = $1, attempts = i.attempts + 1, lease_until = $2 + 60000, updated_at = $2
FROM c WHERE i.id = c.id RETURNING i.id, i.attempts`,
};
const complete = {
  name: 'floor-complete',
  text: `UPDATE floor_items AS i SET state = 'done', owner = NULL, lease_until = NULL, done_at = $4, updated_at = $4
FROM unnest($1::text[], $2::text[], $3::integer[]) AS c(id, owner, attempt)
WHERE i.id = c.id AND i.state = 'claimed' AND i.owner = c.owner AND i.attempts = c.attempt`,
};

let done = 0;
let roundTrips = 0;
const t0 = performance.now();
for (;;) {
  const now = Date.now();
  const { rows } = await c.query({ ...claim, values: [owner, now, BATCH] });
  roundTrips++;
  if (rows.length === 0) break;
  const r = await c.query({ ...complete, values: [rows.map((x) => x.id), rows.map(() => owner), rows.map((x) => x.attempts), Date.now()] });
  roundTrips++;
  if (r.rowCount !== rows.length) throw new Error(`fenced ${rows.length - r.rowCount} of ${rows.length}`);
  done += rows.length;
}
const ms = performance.now() - t0;
const { rows } = await c.query(`SELECT count(*)::int AS n FROM floor_items WHERE state = 'done'`);
await c.end();
if (rows[0].n !== N || done !== N) throw new Error(`floor: ${done} completed, ${rows[0].n} done in the table, expected ${N}`);
process.stdout.write(`BENCH_RESULT=${JSON.stringify({ rows: N, batch: BATCH, ms, rowsPerSec: (N * 1000) / ms, commits: roundTrips, roundTrips })}\n`);
