/**
 * A DBA may make REPEATABLE READ (or SERIALIZABLE) the default isolation of the database or
 * the role. The ledger's decisions read rows after waiting for a lock (the migration lock,
 * the run lock's gate) and must see what was committed while they waited; under a snapshot
 * taken before the wait they did not:
 * - pods starting together on an empty database: all but the first failed with `relation
 *   "items" already exists [42P07]` (exit 1);
 * - the run lock's join decision read the group of the pass before the one that had just
 *   started: a pod of that pass skipped it, and a pod of the previous group joined a pass of
 *   another Job.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgresLedger } from '../../src/ledger/postgres/index.js';
import { tryPostgresRunLock } from '../../src/ledger/postgres/run-lock.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL ledger under a default isolation of REPEATABLE READ', () => {
  let server: PgServer;
  let url = '';
  const db = 'rr';
  beforeAll(async () => {
    server = await startPostgres();
    url = await server.createDatabase(db);
    await server.admin(`ALTER DATABASE ${db} SET default_transaction_isolation = 'repeatable read'`);
  });
  afterAll(async () => {
    await server?.stop();
  });

  /** A session of the test's own, standing in for a sibling pod. */
  const session = async (): Promise<pg.Client> => {
    const c = new pg.Client({ connectionString: url });
    c.on('error', () => undefined); // the server stopping under a failed test
    await c.connect();
    return c;
  };
  /** Sessions waiting for an advisory lock (the readiness signal: they took their snapshot). */
  const waiting = async (n: number) =>
    (await server.admin(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`, [], db)).length >= n;

  it('pods opening an empty database together all start (the later ones find it migrated)', async () => {
    // Hold the migration lock so that both pods take their snapshot and wait behind it.
    const dba = await session();
    await dba.query('BEGIN');
    await dba.query(`SELECT pg_advisory_xact_lock(hashtext('cronsafe:migrate'), hashtext('m'))`);
    const opening = [1, 2].map(() => openPostgresLedger({ url, schema: 'm', job: 'job' }).then((l) => l.close().then(() => 'opened')));
    await until(() => waiting(2), 'both pods waiting for the migration lock');
    await dba.query('COMMIT');
    await dba.end();
    expect(await Promise.all(opening.map((p) => p.catch((e: Error) => e.message)))).toEqual(['opened', 'opened']);
  });

  it("joins the pass its group started while it waited at the gate, and never another group's", async () => {
    const opts = (group: string, owner: string) => ({ url, schema: 'g', name: 'job', group, owner });
    await (await tryPostgresRunLock(opts('old', 'o-1')))!.release(); // a finished pass of group `old`

    /** A sibling starting a pass of `group` while `pod` waits at the gate; returns the pod's lock. */
    const raceAtGate = async (group: string, pod: { group: string; owner: string }) => {
      const sibling = await session();
      await sibling.query('BEGIN');
      await sibling.query(`SELECT pg_advisory_xact_lock(hashtext('g.job'), 2)`);
      const lock = tryPostgresRunLock(opts(pod.group, pod.owner));
      await until(() => waiting(1), 'the pod waiting at the gate');
      await sibling.query(`UPDATE g.run_lock SET run_group = $1, owner = 'sibling' WHERE name = 'job'`, [group]);
      await sibling.query(`SELECT pg_advisory_lock_shared(hashtext('g.job'), 1)`);
      await sibling.query('COMMIT');
      return { lock: await lock, sibling };
    };

    const same = await raceAtGate('new', { group: 'new', owner: 'o-2' });
    expect(same.lock?.joined, 'a pod of the pass that just started joins it').toBe(true);
    await same.lock!.release();
    await same.sibling.end();

    // run_lock now names `new`; a Job of another group starts while a pod of `new` waits.
    const other = await raceAtGate('other', { group: 'new', owner: 'o-3' });
    expect(other.lock, "a pod of `new` stays out of `other`'s pass").toBeNull();
    await other.sibling.end();
  });
});
