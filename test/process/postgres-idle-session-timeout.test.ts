/**
 * A role or database with `idle_session_timeout` (or `idle_in_transaction_session_timeout`):
 * the server ends a session left idle that long with a FATAL (57P05, 25P03). A pooled session
 * picked for a statement just as it timed out gets that FATAL as the statement's answer. It was
 * not taken for a transient error: the claim (or completion) failed the pass with exit 1, and
 * its running attempts' claims waited for their lease (90 s) while the pods beside it waited
 * for them. It is retried on a new session, like a session cut by a restart.
 *
 * The moment is made certain by a TCP proxy in front of the server that, once armed, holds the
 * next statement of the run's claim session for longer than the timeout: the server, idle,
 * ends the session, and its FATAL answers the statement.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { finished, spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase, writeGatedJob } from '../helpers/postgres.js';
import { tcpProxy, type ProxiedConnection } from '../helpers/relay.js';
import { until } from '../helpers/wait.js';

const IDLE_TIMEOUT_MS = 1_000;

interface Proxy {
  port: number;
  /** Hold the next statement (simple query, parse or bind) of a `cronsafe-claims` session, never forwarding it. */
  arm(): void;
  /** Whether an armed hold has happened. */
  held(): boolean;
  close(): Promise<void>;
}

async function proxyTo(port: number): Promise<Proxy> {
  let armed = false;
  let held = false;
  const holding = new WeakSet<ProxiedConnection>();
  const proxy = await tcpProxy(port, {
    fromClient(chunk, conn) {
      const statement = ['Q', 'P', 'B'].includes(String.fromCharCode(chunk[0] ?? 0));
      if (armed && statement && conn.startup.includes('cronsafe-claims')) {
        armed = false;
        held = true;
        holding.add(conn); // the server sees the session idle, and ends it
      }
      return !holding.has(conn);
    },
  });
  return { port: proxy.port, arm: () => void (armed = true), held: () => held, close: proxy.close };
}

let proxy: Proxy | undefined;
afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
});

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a session ended by idle_session_timeout as a statement is sent', () => {
  const pg = usePostgresDatabase('idlesession');

  it('is retried on a new session: the pass finishes (exit 0), the item done and charged once', async () => {
    await pg.server.admin(`ALTER DATABASE idlesession SET idle_session_timeout = ${IDLE_TIMEOUT_MS}`);
    proxy = await proxyTo(pg.server.port);
    const url = pg.url.replace(`:${pg.server.port}/`, `:${proxy.port}/`);
    const ws = workspace({}, { 'a.txt': 'a' });
    const { started, go } = writeGatedJob(ws, url);
    const run = spawnCli(['run', '-c', ws.configPath], { env: { CRONSAFE_RUN_GROUP: 'g1' }, timeoutMs: 120_000 });
    await until(() => existsSync(started), 'the handler to start', 30_000);
    proxy.arm();
    writeFileSync(go, '');
    const e = await run.exited;
    expect(proxy.held(), 'a statement of the claim session was held').toBe(true);
    expect(e.code, run.stderr()).toBe(0);
    expect(finished(run)?.outcome).toBe('completed');
    expect(run.lines.some((l) => l.msg === 'state store: a transient error; retrying' && String(l.err).includes('[57P05]')), run.stderr()).toBe(true);
    const rows = await pg.server.admin<{ id: string; state: string; attempts: number }>(`SELECT id, state, attempts FROM cronsafe.items ORDER BY id`, [], 'idlesession');
    expect(rows).toEqual([{ id: 'a.txt', state: 'done', attempts: 1 }]);
  }, 120_000);
});
