/**
 * A completion whose answer is lost: the connection drops after the claim session's
 * complete-and-claim statement committed, before its answer arrives. The executor runs the
 * statement again (a transient error), and the retry found the items done by this very owner
 * and attempt: it reported them as fenced ("stale claim: write rejected by the ledger
 * (another owner holds this item now)"), the pass's counts said fenced for items that were
 * done, and items_fenced went up, what an operator reads as two pods fighting over an item.
 * The first run's write is the completion: applied, counted once as done, never as fenced.
 *
 * The lost answer is made certain by a TCP proxy in front of the server that, once armed,
 * forwards the next completion statement of the run's claim session, waits for the server's
 * whole answer (up to ReadyForQuery: the statement has committed) and drops it, cutting the
 * connection.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { finished, spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase, writeGatedJob } from '../helpers/postgres.js';
import { tcpProxy, type ProxiedConnection } from '../helpers/relay.js';
import { until } from '../helpers/wait.js';

interface Proxy {
  port: number;
  /** Forward the next completion statement of a `cronsafe-claims` session, drop its whole answer and cut the connection. */
  arm(): void;
  /** Whether an armed answer was dropped. */
  dropped(): boolean;
  close(): Promise<void>;
}

/** Whether `buf` holds a whole ReadyForQuery message ('Z'): the server's answer is complete. */
function answered(buf: Buffer): boolean {
  let o = 0;
  while (o + 5 <= buf.length) {
    const type = String.fromCharCode(buf[o]!);
    const len = buf.readInt32BE(o + 1);
    if (o + 1 + len > buf.length) return false;
    if (type === 'Z') return true;
    o += 1 + len;
  }
  return false;
}

async function proxyTo(port: number): Promise<Proxy> {
  let armed = false;
  let dropped = false;
  /** The answer being held back, by connection: from the armed statement on. */
  const answers = new WeakMap<ProxiedConnection, Buffer>();
  const proxy = await tcpProxy(port, {
    fromClient(chunk, conn) {
      // The pg client sends a statement and waits for its answer: what comes back from now
      // on answers this statement alone.
      if (armed && conn.startup.includes('cronsafe-claims') && chunk.toString('latin1').includes('cronsafe-complete-claim')) {
        armed = false;
        answers.set(conn, Buffer.alloc(0));
      }
      return true;
    },
    fromServer(chunk, conn) {
      const held = answers.get(conn);
      if (held === undefined) return true;
      const answer = Buffer.concat([held, chunk]);
      answers.set(conn, answer);
      if (answered(answer)) {
        dropped = true;
        conn.upstream.destroy();
        conn.client.destroy();
      }
      return false;
    },
  });
  return { port: proxy.port, arm: () => void (armed = true), dropped: () => dropped, close: proxy.close };
}

let proxy: Proxy | undefined;
afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
});

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: the answer to a committed completion lost to a connection cut', () => {
  const pg = usePostgresDatabase('lostanswer');

  it('is retried and counts as applied: every item succeeded once, none fenced, items_done counted once', async () => {
    proxy = await proxyTo(pg.server.port);
    const url = pg.url.replace(`:${pg.server.port}/`, `:${proxy.port}/`);
    const ws = workspace({}, { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' });
    const { started, go } = writeGatedJob(ws, url);
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    await until(() => existsSync(started), 'the handlers to start', 30_000);
    proxy.arm();
    writeFileSync(go, '');
    const e = await run.exited;
    expect(proxy.dropped(), "a completion's answer was dropped").toBe(true);
    expect(e.code, run.stderr()).toBe(0);
    expect(run.lines.some((l) => l.msg === 'state store: a transient error; retrying'), run.stderr()).toBe(true);
    expect(run.lines.filter((l) => l.msg.startsWith('stale claim')).map((l) => l.reason)).toEqual([]);
    expect(finished(run)).toMatchObject({ outcome: 'completed', counts: { succeeded: 3, fenced: 0 } });
    const rows = await pg.server.admin<{ id: string; state: string; attempts: number }>(`SELECT id, state, attempts FROM cronsafe.items ORDER BY id`, [], 'lostanswer');
    expect(rows).toEqual(['a.txt', 'b.txt', 'c.txt'].map((id) => ({ id, state: 'done', attempts: 1 })));
    const counters = await pg.server.admin<{ name: string; value: string }>(
      `SELECT split_part(name, ':', 1) AS name, sum(value)::text AS value FROM cronsafe.counters WHERE name LIKE 'items_done%' OR name LIKE 'items_fenced%' GROUP BY 1 ORDER BY 1`,
      [],
      'lostanswer',
    );
    expect(counters).toEqual([{ name: 'items_done', value: '3' }]);
  }, 120_000);
});
