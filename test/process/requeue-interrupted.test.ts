import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { configure, runCli, spawnCli, workspace, type Workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, psql, usePostgresDatabase } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

const N = 300_000;

/** A real ledger (made by a run), then N items put in by SQL: `state` done or dead. */
async function bigLedger(state: 'done' | 'dead'): Promise<Workspace> {
  const ws = workspace({ handler: { command: ['true'] } });
  expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
  const db = new Database(ws.db);
  const t = Date.now() - 3600_000;
  db.prepare(
    `WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ${N})
    INSERT INTO items (id, state, attempts, available_at, first_seen_at, updated_at, done_at, dead_at, last_error)
    SELECT 'f-' || x, ?, 3, ?, ?, ?, ?, ?, ? FROM n`,
  ).run(state, t, t, t, state === 'done' ? t : null, state === 'dead' ? t + (N % 7) : null, state === 'dead' ? 'boom' : null);
  db.close();
  return ws;
}

/** Items moved so far, by the ledger's own requeue counter (read while the command writes). */
function requeued(ws: Workspace): number {
  const db = new Database(ws.db, { readonly: true, fileMustExist: true });
  try {
    const row = db.prepare(`SELECT value FROM counters WHERE name = 'items_requeued'`).get() as { value: number } | undefined;
    return row?.value ?? 0;
  } finally {
    db.close();
  }
}

const pendingNow = (ws: Workspace): number => {
  const db = new Database(ws.db, { readonly: true, fileMustExist: true });
  try {
    return (db.prepare(`SELECT count(*) AS n FROM items WHERE state = 'pending'`).get() as { n: number }).n;
  } finally {
    db.close();
  }
};

describe('Ctrl-C during a big requeue (real SQLite ledger, real SIGINT)', () => {
  for (const [name, args, state] of [
    ['requeue --all', ['requeue', '--all'], 'done'],
    ['dead-letter retry --all', ['dead-letter', 'retry', '--all'], 'dead'],
  ] as const) {
    it(`${name}: exits 130 at once, saying how many were requeued before the signal and to run it again`, async () => {
      const ws = await bigLedger(state);
      const cmd = spawnCli([...args, '-c', ws.configPath], { timeoutMs: 60_000 });
      // The first pages are written: the command is in the middle of its work.
      await until(() => requeued(ws) > 0, 'the first page requeued', 30_000);
      cmd.child.kill('SIGINT');
      const { code, signal } = await cmd.exited;
      expect(signal).toBeNull();
      expect(code).toBe(130);
      const m = /interrupted by SIGINT: requeued (\d+) (dead )?items before the signal .*run the same command again/.exec(cmd.stderr());
      expect(m, cmd.stderr()).not.toBeNull();
      // What it says is what the ledger holds: the pages before the signal, not all of them.
      const moved = Number(m![1]);
      expect(moved).toBe(pendingNow(ws));
      // A SQLite page is written synchronously: none is ever in flight at the signal, and
      // the line must not say that one may be (it read as up to a page more than said).
      expect(cmd.stderr()).not.toContain('maybe');
      expect(moved).toBeGreaterThan(0);
      expect(moved).toBeLessThan(N);
      expect(cmd.stdout()).not.toContain('requeued');
    }, 60_000);
  }
});

describe.skipIf(PG_SKIP_REASON !== undefined)('Ctrl-C during a big requeue on PostgreSQL (real server, real SIGINT)', () => {
  const pg = usePostgresDatabase('interrupted', 60_000);

  it('requeue --all: exits 130, saying how many were requeued, and the page that may have been committing at the signal', async () => {
    const ws = workspace({ handler: { command: ['true'] }, state: { postgres: pg.url, schema: 'big' } });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    const t = Date.now() - 3600_000;
    const db = new URL(pg.url).pathname.slice(1);
    psql(
      pg.server,
      `INSERT INTO big.items (id, state, attempts, available_at, first_seen_at, updated_at, done_at)
       SELECT 'f-' || x, 'done', 1, ${t}, ${t}, ${t}, ${t} FROM generate_series(1, ${N}) x; ANALYZE big.items`,
      db,
    );
    const pending = () => Number(psql(pg.server, `SELECT count(*) FROM big.items WHERE state = 'pending'`, db).trim());
    const cmd = spawnCli(['requeue', '--all', '-c', ws.configPath], { timeoutMs: 60_000 });
    await until(() => pending() > 0, 'the first page requeued', 30_000);
    cmd.child.kill('SIGINT');
    const { code } = await cmd.exited;
    expect(code).toBe(130);
    const m = /interrupted by SIGINT: requeued (\d+) items before the signal \(pending again, attempts reset\)(, and maybe the page of (\d+) being written at the signal \(moved whole or not at all\))?; the rest were not: run the same command again/.exec(cmd.stderr());
    expect(m, cmd.stderr()).not.toBeNull();
    const said = Number(m![1]);
    const maybe = m![3] === undefined ? 0 : Number(m![3]);
    // The server has committed or rolled back the page in flight by now.
    await until(() => [said, said + maybe].includes(pending()), `${said} (+${maybe}) pending in the ledger, as said`, 10_000);
    expect(said).toBeLessThan(N);
  }, 60_000);
});

describe('a store error partway through a big requeue (real SQLite ledger, a trigger refusing one row)', () => {
  for (const [name, args, state, page] of [
    ['requeue --all', ['requeue', '--all'], 'done', 500],
    ['dead-letter retry --all', ['dead-letter', 'retry', '--all'], 'dead', 2000],
  ] as const) {
    it(`${name}: the error says how many were requeued before it, and that they stay requeued`, async () => {
      const ws = workspace({ handler: { command: ['true'] } });
      expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
      const db = new Database(ws.db);
      const t = Date.now() - 3600_000;
      const n = page * 4;
      db.prepare(
        `WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ${n})
        INSERT INTO items (id, state, attempts, available_at, first_seen_at, updated_at, done_at, dead_at, last_error)
        SELECT printf('f-%06d', x), ?, 3, ?, ?, ?, ?, ?, ? FROM n`,
      ).run(state, t, t, t, state === 'done' ? t : null, state === 'dead' ? t : null, state === 'dead' ? 'boom' : null);
      // An id of the third page (pages go in id order) cannot be written: the command fails there.
      const refused = `f-${String(page * 2 + 7).padStart(6, '0')}`;
      db.exec(`CREATE TRIGGER refuse BEFORE UPDATE ON items WHEN OLD.id = '${refused}' BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END`);
      db.close();
      const r = await runCli([...args, '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain('refused by a trigger');
      const m = /; (\d+) (dead )?items requeued before the error stay requeued \(pending again, attempts reset\): run the same command again to requeue the rest/.exec(r.stderr);
      expect(m, r.stderr).not.toBeNull();
      expect(r.stderr.match(/stay requeued/g)).toHaveLength(1);
      // What it says is what the ledger holds: the two pages before the refused one.
      expect(Number(m![1])).toBe(pendingNow(ws));
      expect(Number(m![1])).toBe(page * 2);
    }, 60_000);
  }
});

describe.skipIf(PG_SKIP_REASON !== undefined)('a store error on the read of a page, partway through requeue --all on PostgreSQL (real server)', () => {
  const pg = usePostgresDatabase('readfails', 60_000);

  it('the error says how many were requeued before it, and that they stay requeued', async () => {
    const ws = workspace({ handler: { command: ['true'] }, state: { postgres: pg.url, schema: 'rq' } });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    const t = Date.now() - 3600_000;
    const db = new URL(pg.url).pathname.slice(1);
    // An operator role whose reads of one row of the third page (pages of 500, in id order)
    // fail: a row-level security policy raising there. Index scans only, so that a page's
    // read looks at its own rows alone.
    psql(
      pg.server,
      `INSERT INTO rq.items (id, state, attempts, available_at, first_seen_at, updated_at, done_at)
         SELECT 'f-' || lpad(x::text, 6, '0'), 'done', 1, ${t}, ${t}, ${t}, ${t} FROM generate_series(1, 2000) x;
       ANALYZE rq.items;
       CREATE ROLE op LOGIN;
       ALTER ROLE op SET enable_seqscan = off;
       ALTER ROLE op SET enable_sort = off;
       GRANT USAGE ON SCHEMA rq TO op;
       GRANT ALL ON ALL TABLES IN SCHEMA rq TO op;
       GRANT ALL ON ALL SEQUENCES IN SCHEMA rq TO op;
       CREATE FUNCTION rq.readable(id text) RETURNS boolean LANGUAGE plpgsql AS $$
         BEGIN IF id = 'f-001007' THEN RAISE EXCEPTION 'refused by a policy'; END IF; RETURN true; END $$;
       ALTER TABLE rq.items ENABLE ROW LEVEL SECURITY;
       CREATE POLICY reads ON rq.items USING (rq.readable(id));`,
      db,
    );
    const url = new URL(pg.url);
    url.username = 'op';
    configure(ws, { state: { postgres: url.toString(), schema: 'rq' } });
    const pending = () => Number(psql(pg.server, `SELECT count(*) FROM rq.items WHERE state = 'pending'`, db).trim());
    const r = await runCli(['requeue', '--all', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain('refused by a policy');
    // Before: the error alone, as if nothing had moved, with 1000 items pending again.
    const m = /; (\d+) items requeued before the error stay requeued \(pending again, attempts reset\): run the same command again to requeue the rest/.exec(r.stderr);
    expect(m, r.stderr).not.toBeNull();
    expect(Number(m![1])).toBe(pending());
    expect(Number(m![1])).toBe(1000);
  }, 60_000);
});
