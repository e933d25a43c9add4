/**
 * A drain whose hand-backs cannot be written (every hand-back statement's connection is cut,
 * until the drain's deadline). Before, each interrupted item was logged "item interrupted;
 * claim handed back (attempt not charged)" before its hand-back was written, so the log said
 * not charged of claims the ledger still held: taken back after their lease, and charged.
 * Now the line comes once the hand-back is applied, and none is said of one never written.
 */
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { spawnCli, workspace, type Running } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';
import { tcpProxy, type TcpProxy } from '../helpers/relay.js';
import { until } from '../helpers/wait.js';

let proxy: TcpProxy | undefined;
let run: Running | undefined;
afterEach(async () => {
  if (run?.child.exitCode === null) run.child.kill('SIGKILL');
  run = undefined;
  await proxy?.close();
  proxy = undefined;
});

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a drain whose hand-backs are never written', () => {
  const pg = usePostgresDatabase('handbackcut');

  it('says "claim handed back (attempt not charged)" of none of them: the claims stay in the ledger, for their lease', async () => {
    let cut = false;
    proxy = await tcpProxy(pg.server.port, {
      fromClient(chunk, conn) {
        if (!cut || !chunk.toString('latin1').includes('released = i.released + 1')) return true;
        conn.upstream.destroy();
        conn.client.destroy();
        return false;
      },
    });
    const ws = workspace({}, { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' });
    const started = path.join(ws.dir, 'started');
    writeFileSync(
      ws.configPath,
      [
        'name: test-job',
        `source: {directory: ${ws.source}}`,
        `output: {directory: ${ws.out}}`,
        `state: {postgres: "${pg.url.replace(`:${pg.server.port}/`, `:${proxy.port}/`)}"}`,
        `lock: {path: ${path.join(ws.state, 'cronsafe.lock')}}`,
        `handler: {command: ["/bin/sh", "-c", "touch '${started}'; exec sleep 600"]}`,
        'drain: {gracePeriodSeconds: 8, marginSeconds: 4}',
      ].join('\n'),
    );
    run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
    await until(() => existsSync(started), 'the handlers to start', 30_000);
    const claimed = async () => pg.server.admin<{ id: string }>(`SELECT id FROM cronsafe.items WHERE state = 'claimed' ORDER BY id`, [], 'handbackcut');
    await until(async () => (await claimed()).length === 3, 'the three claims', 30_000);
    cut = true;
    run.child.kill('SIGTERM');
    const e = await run.exited;
    expect(e.code, run.stderr()).toBe(75);
    expect(run.lines.filter((l) => /claim handed back/.test(l.msg)).map((l) => `${String(l.itemId)}: ${l.msg}`), run.stderr()).toEqual([]);
    expect(await claimed()).toEqual([{ id: 'a.txt' }, { id: 'b.txt' }, { id: 'c.txt' }]);
  }, 60_000);
});
