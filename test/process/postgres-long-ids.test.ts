/**
 * A file nested deep with long, varied names has an id (its relative path) too long for the
 * PostgreSQL ledger's primary key index: a btree entry is at most 2,704 bytes after
 * compression. Its discovery failed the whole batch (`index row size ... exceeds btree
 * version 4 maximum 2704`), so every run failed (exit 1) before any item of the backlog ran,
 * and the message did not say which file. Such an item is now left out with a warning naming
 * it; the rest of the backlog runs. A long id that compresses (repeated names) still fits, and
 * runs like any other.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

/** A 200-character segment that does not compress (hex of hashes). */
const varied = (seed: string): string => {
  let s = '';
  for (let i = 0; s.length < 200; i++) s += createHash('sha256').update(`${seed}-${i}`).digest('hex');
  return s.slice(0, 200);
};

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: an item whose id is too long for the ledger index', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('is left out with a warning naming it; the other items run, every run exits 0', async () => {
    // 14 x 201 bytes: ~2,800, past the index's limit, and incompressible.
    const tooLong = `${Array.from({ length: 14 }, (_, i) => varied(`d${i}`)).join('/')}/leaf.txt`;
    // Longer still, but it compresses: it fits, and must not be refused for its length alone.
    const compressible = `${Array.from({ length: 15 }, () => 'd'.repeat(200)).join('/')}/leaf.txt`;
    const ws = workspace(
      { handler: { command: ['cp', '{path}', '{output}'] }, state: { postgres: await server.createDatabase('longids') } },
      { 'plain.txt': 'a\n', [tooLong]: 'b\n', [compressible]: 'c\n' },
    );
    for (let run = 1; run <= 2; run++) {
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(0);
      const refused = r.lines.filter((l) => l.msg.startsWith('scan: left out an item the ledger cannot record'));
      expect(refused.map((l) => l.itemId)).toEqual([tooLong]);
      expect(String(refused[0]?.reason)).toContain('too long');
    }
    expect(existsSync(path.join(ws.out, 'plain.txt.out'))).toBe(true);
    expect(existsSync(path.join(ws.out, `${compressible}.out`))).toBe(true);
    const rows = await server.admin<{ id: string; state: string }>(`SELECT id, state FROM cronsafe.items ORDER BY id`, [], 'longids');
    expect(rows).toEqual([
      { id: compressible, state: 'done' },
      { id: 'plain.txt', state: 'done' },
    ]);
  }, 120_000);

  // The pending-items index holds the pass's run group beside the id, so an id that fit under
  // a short group (a run's own id) is refused under a longer one (a Job's name, or
  // CRONSAFE_RUN_GROUP). Refused, it was not marked seen, and the complete scan then forgot
  // its row as if its file were gone: attempts and last error lost, with the file still there.
  it('recorded under a shorter run group, and refused under a longer one: its row is kept, not forgotten', async () => {
    // 13 x 201 bytes and a leaf: ~2,640, incompressible: fits beside a 17-byte run id, not beside ~66 bytes.
    const id = `${Array.from({ length: 13 }, (_, i) => varied(`g${i}`)).join('/')}/leaf-abcdefghijklmnop.txt`;
    const db = await server.createDatabase('longgroup');
    // It fails, and waits out retry.backoffSeconds (30 s by default): pending after the run.
    const ws = workspace({ handler: { command: ['false'] }, state: { postgres: db } }, { [id]: 'b\n' });
    const first = await runCli(['run', '-c', ws.configPath]);
    expect(first.code, first.stderr).toBe(0);
    const before = await server.admin<{ state: string; attempts: number }>(`SELECT state, attempts FROM cronsafe.items WHERE id = $1`, [id], 'longgroup');
    expect(before).toEqual([{ state: 'pending', attempts: 1 }]);
    const r = await runCli(['run', '-c', ws.configPath], { env: { CRONSAFE_RUN_GROUP: 'g'.repeat(60) } });
    expect(r.code, r.stderr).toBe(0);
    expect(r.lines.filter((l) => l.msg.startsWith('scan: left out an item')).map((l) => l.itemId)).toEqual([id]);
    expect(r.lines.some((l) => l.msg.startsWith('forgot pending items'))).toBe(false);
    const after = await server.admin<{ state: string; attempts: number }>(`SELECT state, attempts FROM cronsafe.items WHERE id = $1`, [id], 'longgroup');
    expect(after).toEqual([{ state: 'pending', attempts: 1 }]);
  }, 120_000);
});
