/**
 * `cronsafe daemon` whose ledger a newer cronsafe migrated while it ran (a manual `cronsafe
 * run` of the new version, another host's upgraded binary, a pod of the new image). At its
 * start the daemon ends on such a ledger (exit 1, "newer than this cronsafe knows; upgrade
 * cronsafe"). Met by a pass later, it was waited out as an outage that never ends: each tick
 * logged "the state store is unavailable", then "the state store is available again" (its own
 * reads still worked on the connection it had open), then started the pass, which failed
 * again, for ever, running nothing. Only an upgrade helps: the daemon now ends as at its start.
 */
import path from 'node:path';
import { writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { FIXTURES, spawnCli, workspace, type Workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';

const AVAILABLE_AGAIN = 'daemon: the state store is available again';

/** A daemon that has run its first pass; `newer` then leaves a version this cronsafe does not know, as a newer one's migration does. */
async function daemonOnNewerLedger(state: Record<string, unknown>, newer: (ws: Workspace) => Promise<void>): Promise<{ code: number | null; stderr: string; againSaid: number }> {
  // A yearly occurrence long past: one pass at start, then growth passes only.
  const ws = workspace(
    {
      handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') },
      ...state,
      schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' },
      daemon: { tickSeconds: 1, growth: { enabled: true, cooldownSeconds: 1 } },
    },
    { 'a.scc': 'a' },
  );
  const daemon = spawnCli(['daemon', '-c', ws.configPath], { timeoutMs: 30_000 });
  try {
    await daemon.waitFor((l) => l.msg === 'run finished');
    await newer(ws);
    writeFileSync(path.join(ws.source, 'b.scc'), 'b'); // a growth pass opens the ledger
    await Promise.race([daemon.exited, daemon.waitFor((l) => l.msg === AVAILABLE_AGAIN, 15_000)]);
  } finally {
    daemon.child.kill('SIGTERM');
  }
  const { code } = await daemon.exited;
  return { code, stderr: daemon.stderr(), againSaid: daemon.lines.filter((l) => l.msg === AVAILABLE_AGAIN).length };
}

describe('cronsafe daemon on a ledger a newer cronsafe migrated meanwhile', () => {
  it('SQLite: ends with exit 1 naming the newer schema, instead of waiting for it tick after tick', async () => {
    let db = '';
    const { code, stderr, againSaid } = await daemonOnNewerLedger({}, async (ws) => {
      db = ws.db;
      const sqlite = new Database(ws.db);
      try {
        sqlite.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, ?, ?)').run('from-a-newer-cronsafe', Date.now());
      } finally {
        sqlite.close();
      }
    });
    expect(code, stderr).toBe(1);
    expect(stderr).toContain(`cronsafe: state store unavailable (sqlite ${db}): ledger ${db} has schema version 99, newer than this cronsafe knows (`);
    expect(stderr).toMatch(/\); upgrade cronsafe\n$/);
    expect(stderr.split('\n')).toHaveLength(2); // one line, no stack
    expect(againSaid).toBe(0);
  });
});

describe.skipIf(PG_SKIP_REASON !== undefined)('cronsafe daemon on a PostgreSQL ledger a newer cronsafe migrated meanwhile', () => {
  const pg = usePostgresDatabase('daemon_newer');

  it('ends with exit 1 naming the newer schema, instead of waiting for it tick after tick', async () => {
    const { code, stderr, againSaid } = await daemonOnNewerLedger({ state: { postgres: pg.url } }, async () => {
      await pg.server.admin(`INSERT INTO cronsafe.schema_migrations (version, name, applied_at) SELECT 99, 'from-a-newer-cronsafe', applied_at FROM cronsafe.schema_migrations LIMIT 1`, [], 'daemon_newer');
    });
    expect(code, stderr).toBe(1);
    expect(stderr).toContain('ledger schema cronsafe has schema version 99, newer than this cronsafe knows (');
    expect(stderr).toMatch(/^cronsafe: state store unavailable \(postgres\): .*; upgrade cronsafe\n$/);
    expect(againSaid).toBe(0);
  });
});
