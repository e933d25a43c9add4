/**
 * docs/postgres.md, "Locking": when the run lock's session is cut (a failover), the runner
 * takes the lock again, retrying for up to 30 s. A connect that timed out (the server's
 * address silent for a moment: a failover whose old address drops packets, a DNS that does
 * not answer) failed with pg's `timeout expired`, which was not taken for a transient error:
 * the lock was lost at the first try, 10 s after the cut, and the pass drained (exit 75) though
 * the server was back well within the 30 s. It is retried like the pool's own connect timeout.
 *
 * The silent server is a TCP proxy in front of the real one that, once switched, accepts
 * connections and never answers; the test waits until the lock's connect (its startup
 * message names application_name cronsafe-lock) has been given up by the client.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase, writeGatedJob } from '../helpers/postgres.js';
import { tcpProxy } from '../helpers/relay.js';
import { until } from '../helpers/wait.js';

interface Proxy {
  port: number;
  /** Cut every connection, and from now on accept and never answer. */
  goSilent(): void;
  /** Forward again. */
  forward(): void;
  /** Connects given up by the client while silent, by what their startup message says. */
  givenUp: string[];
  close(): Promise<void>;
}

async function proxyTo(port: number): Promise<Proxy> {
  let silent = false;
  const givenUp: string[] = [];
  const proxy = await tcpProxy(port, {
    accept(client) {
      if (!silent) return true;
      let said = '';
      client.on('data', (d: Buffer) => (said += d.toString('latin1')));
      client.on('close', () => givenUp.push(said));
      return false;
    },
  });
  return {
    port: proxy.port,
    goSilent() {
      silent = true;
      proxy.cutAll();
    },
    forward() {
      silent = false;
    },
    givenUp,
    close: proxy.close,
  };
}

let proxy: Proxy | undefined;
afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
});

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL run lock: a connect that times out while it is taken again', () => {
  const pg = usePostgresDatabase('lockconnect');

  it('is retried within the 30 s: the server back after one connect timeout, the lock is taken again and the pass finishes (exit 0)', async () => {
    proxy = await proxyTo(pg.server.port);
    const ws = workspace({}, { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' });
    const { started, go } = writeGatedJob(ws, pg.url.replace(`127.0.0.1:${pg.server.port}`, `127.0.0.1:${proxy.port}`), ['concurrency: 1']);
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    await run.waitFor((l) => l.msg.startsWith('run lock taken'));
    await until(() => existsSync(started), 'the first handler to start', 30_000);

    proxy.goSilent();
    await run.waitFor((l) => l.msg === 'run lock session lost; taking the lock again');
    // pg's connect timeout is 10 s.
    await until(() => proxy!.givenUp.some((s) => s.includes('cronsafe-lock')), "the lock's connect to time out", 40_000);
    proxy.forward();
    // Taken again before the items go on: else the last items could finish (and the run end,
    // 0) while the lock's next try was still in its back-off, and nothing would be shown.
    await run.waitFor((l) => l.msg === 'run lock taken again', 40_000);
    writeFileSync(go, '');

    const { code, signal } = await run.exited;
    const msgs = run.lines.map((l) => `${l.msg} ${String(l.reason ?? '')}`);
    expect(msgs.filter((m) => m.includes('run lock lost'))).toEqual([]);
    expect(run.lines.some((l) => l.msg === 'run lock taken again')).toBe(true);
    expect({ code, signal }, `${run.stderr()}\n${msgs.join('\n')}`).toEqual({ code: 0, signal: null });
  }, 120_000);
});
