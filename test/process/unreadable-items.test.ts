/**
 * The items' files this user may not read: the pod's user changed (a new `runAsUser`, a
 * restore that changed the volume's owner, an fsGroup dropped). Every attempt failed with
 * "Permission denied", each was charged, and the whole backlog was dead-lettered in
 * retry.maxAttempts runs, each exiting 0. Before any attempt of the pass has succeeded, such
 * a failure now stops the pass uncharged (exit 1), as a missing program does.
 */
import { chmodSync, chownSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { FIXTURES, runCli, statusJson, workspace } from '../helpers/cli.js';
import { chownTree, NOBODY } from '../helpers/users.js';

const isRoot = process.getuid?.() === 0;
const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];

describe('items whose files this user cannot read', () => {
  it('stop the pass before any attempt succeeded, nothing charged; readable again, they are done', async () => {
    const files = ['a.txt', 'b.txt', 'c.txt'];
    const ws = workspace({ handler: { command: COPY } }, Object.fromEntries(files.map((f) => [f, f])));
    const as = isRoot ? { uid: NOBODY, gid: NOBODY } : {};
    if (isRoot) chownTree(ws.dir, NOBODY);
    for (const f of files) {
      const file = path.join(ws.source, f);
      // Another user's private files (root's, mode 0600), or this user's own with no read bit.
      if (isRoot) chownSync(file, 0, 0);
      chmodSync(file, isRoot ? 0o600 : 0o200);
    }
    const first = await runCli(['run', '-c', ws.configPath], as);
    expect(first.code, first.stderr).toBe(1);
    expect(JSON.stringify(first.lines)).toMatch(/cannot be read by this user \(uid \d+: EACCES\)/);
    const db = new Database(ws.db, { readonly: true });
    try {
      const rows = db.prepare('SELECT id, state, attempts - released AS charged FROM items ORDER BY id').all() as Array<{ id: string; state: string; charged: number }>;
      expect(rows.map((r) => r.id)).toEqual(files);
      expect(rows.every((r) => r.state === 'pending' && r.charged === 0), JSON.stringify(rows)).toBe(true);
    } finally {
      db.close();
    }
    for (const f of files) chmodSync(path.join(ws.source, f), 0o644);
    const next = await runCli(['run', '-c', ws.configPath], as);
    expect(next.code, next.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ done: 3, pending: 0, dead: 0 });
  }, 60_000);

  it('one file another user made private: handed back retry.maxAttempts times, then charged (the pass still stops)', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'private.txt': 'p' });
    const as = isRoot ? { uid: NOBODY, gid: NOBODY } : {};
    if (isRoot) chownTree(ws.dir, NOBODY);
    const file = path.join(ws.source, 'private.txt');
    if (isRoot) chownSync(file, 0, 0);
    chmodSync(file, isRoot ? 0o600 : 0o200);
    const charged = () => {
      const db = new Database(ws.db, { readonly: true });
      try {
        return (db.prepare('SELECT attempts - released AS charged FROM items').get() as { charged: number }).charged;
      } finally {
        db.close();
      }
    };
    const codes: number[] = [];
    // retry.maxAttempts (5, the default) uncharged hand-backs, then the next attempt is charged.
    for (let run = 0; run < 6; run++) {
      const r = await runCli(['run', '-c', ws.configPath], as);
      codes.push(r.code ?? -1);
      if (run === 4) expect(charged()).toBe(0);
    }
    expect(codes).toEqual([1, 1, 1, 1, 1, 1]);
    expect(charged()).toBe(1);
  }, 60_000);
});
