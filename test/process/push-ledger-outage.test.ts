/**
 * `cronsafe run` pushing to a Pushgateway on PostgreSQL, the database down while the pass runs
 * (its handlers go on). A push reads the ledger first, and its reads retry for up to 30 s: each
 * push hit its timeout while still reading, and was logged as `metrics push failed (the run
 * carries on)`, `timed out`, at every push interval through the outage (120 warnings an hour
 * at the default 30 s), which sent operators to the Pushgateway, which was fine. It is now the
 * skipped push docs/metrics.md describes: `metrics: not pushing, the ledger could not be read`,
 * once until a push lands again.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FIXTURES, spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';
import { filesIn, until } from '../helpers/wait.js';

const SLOW = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];

let gateway: Server | undefined;
afterEach(async () => {
  gateway?.closeAllConnections();
  await new Promise((r) => gateway?.close(r) ?? r(undefined));
  gateway = undefined;
});

describe.skipIf(PG_SKIP_REASON !== undefined)('pushes while PostgreSQL is down mid-pass', () => {
  const db = usePostgresDatabase('push_ledger_outage');

  it('are skipped with one warning that names the ledger, not failed pushes at every interval', async () => {
    let pushes = 0;
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        pushes++;
        res.end();
      });
    });
    gateway = server;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    const ws = workspace(
      { handler: { command: SLOW }, concurrency: 1, state: { postgres: db.url }, metrics: { pushgateway: `http://127.0.0.1:${port}`, pushIntervalSeconds: 2 } },
      { 'a.txt': 'a' },
    );
    const markers = path.join(ws.dir, 'markers');
    const run = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '20000' }, timeoutMs: 90_000 });
    await until(() => filesIn(markers).length === 1 && pushes >= 1, 'the handler to start and the first push');
    await db.server.halt();
    try {
      // Three push intervals and more in the outage.
      await run.waitFor((l) => l.msg.startsWith('metrics push failed') || (l.msg.startsWith('metrics: not pushing') && l.level === 'warn'), 20_000);
      await new Promise((r) => setTimeout(r, 6_000));
    } finally {
      await db.server.start();
    }
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(0);
    const said = run.lines.filter((l) => l.level === 'warn' && (l.msg.startsWith('metrics push failed') || l.msg.startsWith('metrics: not pushing'))).map((l) => `${l.msg} ${String(l.error ?? '')}`);
    expect(said).toEqual(['metrics: not pushing, the ledger could not be read (the Pushgateway keeps what was pushed last) ']);
  }, 90_000);
});
