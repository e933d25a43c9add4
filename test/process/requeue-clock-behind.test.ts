/**
 * A requeue (or dead-letter retry) of items whose last transition was written by a clock
 * ahead of the next run's (a clock stepped back, a node's clock skewed) sets their
 * updated_at past the runner's clock; the run's write-behind then never applies its
 * journalled starts and successes (their guard is updated_at <= start time), so its sweep
 * claims each item again: every requeued item runs twice in one pass, no crash involved.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';
import { LIBFAKETIME } from '../helpers/faketime.js';

const HANDLER = `import { appendFileSync } from 'node:fs';
export default async function h(item) {
  appendFileSync(process.env.EVENTS, item.id + '\\n');
  if (process.env.FAIL_B === '1' && item.id === 'b.txt') throw new Error('b fails');
}
`;

describe.skipIf(LIBFAKETIME === undefined)('requeue after a clock ahead', () => {
  it('runs each requeued item once in the next pass', async () => {
    const ws = workspace({ handler: { module: 'handler.mjs' }, log: { level: 'info' } }, { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' });
    writeFileSync(path.join(ws.dir, 'handler.mjs'), HANDLER);
    const events = path.join(ws.dir, 'events');
    const env = { EVENTS: events };
    // The first pass's clock is an hour ahead of what follows.
    const first = await runCli(['run', '-c', ws.configPath], { cwd: ws.dir, env: { ...env, LD_PRELOAD: LIBFAKETIME!, FAKETIME: '+1h' } });
    expect(first.code, first.stderr).toBe(0);
    const requeue = await runCli(['requeue', '-c', ws.configPath, '--all'], { cwd: ws.dir, env });
    expect(requeue.code, requeue.stderr).toBe(0);
    writeFileSync(events, '');
    const second = await runCli(['run', '-c', ws.configPath], { cwd: ws.dir, env });
    expect(second.code, second.stderr).toBe(0);
    const ran = existsSync(events) ? readFileSync(events, 'utf8').split('\n').filter(Boolean).sort() : [];
    expect(ran).toEqual(['a.txt', 'b.txt', 'c.txt']);
    // Each recorded once: attempt 1, done.
    const db = new Database(ws.db, { readonly: true });
    try {
      expect(db.prepare('SELECT id, state, attempts FROM items ORDER BY id').all()).toEqual([
        { id: 'a.txt', state: 'done', attempts: 1 },
        { id: 'b.txt', state: 'done', attempts: 1 },
        { id: 'c.txt', state: 'done', attempts: 1 },
      ]);
    } finally {
      db.close();
    }
  }, 60_000);

  it('charges a failing requeued item once, with nothing fenced', async () => {
    const ws = workspace({ handler: { module: 'handler.mjs' }, log: { level: 'info' } }, { 'a.txt': 'a', 'b.txt': 'b' });
    writeFileSync(path.join(ws.dir, 'handler.mjs'), HANDLER);
    const events = path.join(ws.dir, 'events');
    const first = await runCli(['run', '-c', ws.configPath], { cwd: ws.dir, env: { EVENTS: events, LD_PRELOAD: LIBFAKETIME!, FAKETIME: '+1h' } });
    expect(first.code, first.stderr).toBe(0);
    const requeue = await runCli(['requeue', '-c', ws.configPath, '--all'], { cwd: ws.dir, env: { EVENTS: events } });
    expect(requeue.code, requeue.stderr).toBe(0);
    writeFileSync(events, '');
    const second = await runCli(['run', '-c', ws.configPath], { cwd: ws.dir, env: { EVENTS: events, FAIL_B: '1' } });
    const ran = readFileSync(events, 'utf8').split('\n').filter(Boolean).sort();
    expect(ran, second.stderr).toEqual(['a.txt', 'b.txt']);
    const finished = second.lines.find((l) => l.msg === 'run finished');
    expect(finished?.fenced ?? finished?.counts, JSON.stringify(finished)).not.toBeUndefined();
    expect(JSON.stringify(finished)).not.toMatch(/"fenced":[1-9]/);
    const db = new Database(ws.db, { readonly: true });
    try {
      expect(db.prepare('SELECT id, state, attempts FROM items ORDER BY id').all()).toEqual([
        { id: 'a.txt', state: 'done', attempts: 1 },
        { id: 'b.txt', state: 'pending', attempts: 1 },
      ]);
    } finally {
      db.close();
    }
  }, 60_000);
});
