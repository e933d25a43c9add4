/**
 * A claim left by a dead pod whose row's seen_at is older than a day (or NULL: every row of a
 * ledger that cronsafe 0.1.0 made, since migration 004 added the column), taken over and done
 * by the next pass. Discovery skips claimed rows, so its seen_at stayed old, and the retention
 * walk at the end of that pass marked the item missing although its file was there and its
 * handler had just run: `retention: pruned the ledger` said markedMissing for every such claim
 * on the first run after the upgrade. Real server, real CLI.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a dead pod\'s claim taken over and done is not marked missing', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('its file is there and its handler just ran: no missing mark, nothing to forget later', async () => {
    const url = await server.createDatabase('orphan_seen');
    const ws = workspace({ handler: { command: ['true'] }, state: { postgres: url, schema: 'orphan_seen' }, log: { level: 'info' } }, { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' });
    const first = await runCli(['run', '-c', ws.configPath]);
    expect(first.code).toBe(0);
    // As a ledger from 0.1.0 after migration 004, with a pod killed mid-attempt: b.txt claimed
    // by it (its lease long run out), and no seen_at on any row.
    const gone = Date.now() - 2 * 24 * 3600 * 1000;
    await server.admin(
      `UPDATE orphan_seen.items SET state = 'claimed', owner = 'dead-pod:7:old', lease_until = $1, done_at = NULL, done_by = NULL, seen_run = 'old' WHERE id = 'b.txt'`,
      [gone],
      'orphan_seen',
    );
    await server.admin(`UPDATE orphan_seen.items SET seen_at = NULL`, [], 'orphan_seen');

    const second = await runCli(['run', '-c', ws.configPath]);
    expect(second.code).toBe(0);
    const rows = await server.admin<{ id: string; state: string; missing_since: string | null }>(
      `SELECT id, state, missing_since FROM orphan_seen.items ORDER BY id`,
      [],
      'orphan_seen',
    );
    expect(rows).toEqual([
      { id: 'a.txt', state: 'done', missing_since: null },
      { id: 'b.txt', state: 'done', missing_since: null },
      { id: 'c.txt', state: 'done', missing_since: null },
    ]);
    const pruned = second.lines.find((l) => l.msg === 'retention: pruned the ledger');
    expect((pruned?.pruned as { markedMissing?: number } | undefined)?.markedMissing ?? 0).toBe(0);
  }, 120_000);
});
