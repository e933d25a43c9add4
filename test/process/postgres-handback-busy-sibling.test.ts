/**
 * Issue 11: a sibling's hand-back is taken up by a pod with a free slot, even while that
 * pod still runs a long attempt of its own. Before, a pod whose sweep had found nothing
 * waited for one of its own attempts to end before it swept again: a pod running one
 * long item (a model, a transfer: minutes, hours) left its other slots idle while the
 * items a stopped sibling handed back waited for that item to end.
 * Real processes, a real server, default retry settings.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { spawnCli, workspace, type Running } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';
import { until } from '../helpers/wait.js';

/**
 * Marks `started-<id>-<pod>` in the workspace, then waits for `go` (or the attempt's
 * abort), then writes the pod's name as the output.
 */
const GATED_HANDLER = `import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
export default async function gated(item, ctx) {
  const dir = process.env.TEST_DIR;
  writeFileSync(path.join(dir, 'started-' + item.id + '-' + process.env.TEST_POD), '');
  await new Promise((resolve, reject) => {
    const t = setInterval(() => { if (existsSync(path.join(dir, 'go'))) { clearInterval(t); resolve(); } }, 50);
    ctx.signal.addEventListener('abort', () => { clearInterval(t); reject(new Error('aborted')); }, { once: true });
  });
  writeFileSync(ctx.outputPath, process.env.TEST_POD);
}
`;

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a busy pod with a free slot takes a sibling\'s hand-back', () => {
  const pg = usePostgresDatabase('busy');

  it('while its own long attempt runs', async () => {
    // B has two slots: it runs long.txt and has one free. A has one, for x.txt (with a
    // free slot of its own it could take long.txt first).
    const ws = workspace({ handler: { module: 'handler.mjs' }, state: { postgres: pg.url, schema: 'busy' }, concurrency: 2, log: { level: 'info' } }, { 'x.txt': 'x' });
    writeFileSync(path.join(ws.dir, 'handler.mjs'), GATED_HANDLER);
    const oneSlot = path.join(ws.dir, 'one-slot.yaml');
    writeFileSync(oneSlot, readFileSync(ws.configPath, 'utf8').replace(/^concurrency: 2$/m, 'concurrency: 1'));
    expect(readFileSync(oneSlot, 'utf8')).toMatch(/^concurrency: 1$/m);
    const started = (id: string, pod: string) => existsSync(path.join(ws.dir, `started-${id}-${pod}`));
    const pod = (name: string, config: string): Running =>
      spawnCli(['run', '-c', config], { env: { CRONSAFE_RUN_GROUP: 'busy-1', TEST_DIR: ws.dir, TEST_POD: name }, timeoutMs: 90_000 });

    const a = pod('a', oneSlot);
    await until(() => started('x.txt', 'a'), 'A to start x.txt', 30_000);
    // long.txt appears once x.txt is A's: B's scan finds it alone claimable.
    writeFileSync(path.join(ws.source, 'long.txt'), 'long');
    const b = pod('b', ws.configPath);
    await until(() => started('long.txt', 'b'), 'B to start long.txt', 30_000);

    // A forced stop (second signal) aborts A's attempt and hands x.txt back, uncharged.
    a.child.kill('SIGTERM');
    await a.waitFor((l) => /drain: stopped claiming/.test(l.msg), 30_000);
    a.child.kill('SIGTERM');
    const ea = await a.exited;
    expect(ea.code, a.stderr()).toBe(75);

    // B's free slot takes it while long.txt still runs (before: only once long.txt ended).
    await until(() => started('x.txt', 'b'), "B to take x.txt up while long.txt runs", 10_000);
    expect(existsSync(path.join(ws.out, 'long.txt.out'))).toBe(false);

    writeFileSync(path.join(ws.dir, 'go'), '');
    const eb = await b.exited;
    expect(eb.code, b.stderr()).toBe(0);
    expect(b.lines.find((l) => l.msg === 'run finished')?.outcome).toBe('completed');
    const rows = await pg.server.admin<{ id: string; state: string; attempts: number; released: number }>(
      `SELECT id, state, attempts, released FROM busy.items ORDER BY id`,
      [],
      'busy',
    );
    // x.txt: two starts, the first handed back (not charged).
    expect(rows).toEqual([
      { id: 'long.txt', state: 'done', attempts: 1, released: 0 },
      { id: 'x.txt', state: 'done', attempts: 2, released: 1 },
    ]);
  }, 120_000);
});
