/**
 * An upgrade while a run of cronsafe 0.1.0 is going on the same SQLite ledger. A run now
 * also flocks the ledger file, and holding that flock was taken to prove every other run of
 * the ledger gone, so the heartbeat check was skipped. 0.1.0 takes no such flock: its run
 * is kept out only by its lock.path, which the chart has since moved from beside the ledger to
 * the pod's /tmp. A run of the new version beside it (a `kubectl create job --from` during the
 * upgrade, as a real 0.1.0 build showed) marked the 0.1.0 run 'died', reclaimed its claims
 * and ran its items beside it. Runs started before the ledger reached schema 5 (which no
 * cronsafe without that flock opens) are now told alive by their heartbeat, as before it.
 */
import path from 'node:path';
import { writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { FIXTURES, runCli, statusJson, workspace } from '../helpers/cli.js';

describe('an upgrade beside a running cronsafe from before the flock on the ledger file', () => {
  it("skips while that run beats in the ledger, leaving its claims alone; runs of this version are still proved dead by the flock", async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') } }, { 'a.txt': 'a' });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    writeFileSync(path.join(ws.source, 'b.txt'), 'b');

    // The ledger as a 0.1.0 run on another node leaves it while it works on a.txt: schema
    // before 5, its run unfinished (0.1.0 beats only after lease.renewSeconds), its claim.
    const owner = 'node-b:4242:old-run';
    const now = Date.now();
    const db = new Database(ws.db);
    try {
      db.exec(`DELETE FROM schema_migrations WHERE version >= 5; DROP INDEX items_suspect; ALTER TABLE items DROP COLUMN seen_at;`);
      db.prepare('INSERT INTO runs (run_id, owner, started_at) VALUES (?, ?, ?)').run('old-run', owner, now - 2_000);
      db.prepare(`UPDATE items SET state = 'claimed', owner = ?, attempts = attempts + 1, lease_until = ?, done_at = NULL WHERE id = 'a.txt'`).run(owner, now + 90_000);
    } finally {
      db.close();
    }

    const skipped = await runCli(['run', '-c', ws.configPath]);
    expect(skipped.code, skipped.stderr).toBe(0);
    expect(skipped.lines.find((l) => l.msg === 'run finished')).toMatchObject({ outcome: 'skipped-locked' });
    expect(skipped.lines.find((l) => String(l.msg).startsWith('skipped: another run of this job is alive'))).toMatchObject({ liveRun: { runId: 'old-run', owner } });
    expect(skipped.lines.some((l) => l.msg === "marked runs that never finished as 'died' (their process is gone)")).toBe(false);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ claimed: 1, done: 0 });

    // That run ends (or stops beating): the next start goes ahead, on the migrated ledger.
    const ended = new Database(ws.db);
    try {
      ended.prepare(`UPDATE runs SET finished_at = ?, outcome = 'completed' WHERE run_id = 'old-run'`).run(Date.now());
      ended.prepare(`UPDATE items SET state = 'done', owner = NULL, lease_until = NULL, done_at = ? WHERE id = 'a.txt'`).run(Date.now());
    } finally {
      ended.close();
    }
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });

    // A run of this version is proved dead by the flock at once, unfinished and beating as it is.
    writeFileSync(path.join(ws.source, 'c.txt'), 'c');
    const killed = new Database(ws.db);
    try {
      killed.prepare('INSERT INTO runs (run_id, owner, started_at, heartbeat_at) VALUES (?, ?, ?, ?)').run('killed-run', 'node-b:4243:killed-run', Date.now(), Date.now());
    } finally {
      killed.close();
    }
    const after = await runCli(['run', '-c', ws.configPath]);
    expect(after.lines.find((l) => l.msg === 'run finished')).toMatchObject({ outcome: 'completed' });
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 3, dead: 0 });
  });
});
