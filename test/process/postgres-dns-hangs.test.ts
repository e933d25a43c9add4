/**
 * The cluster's DNS does not answer (CoreDNS overloaded, a node's network cut) with
 * state.postgres given by host name, as it is in a cluster (a Service, a provider's endpoint).
 * pg's socket looked the name up with Node's dns.lookup, on a libuv thread that nothing stops
 * and that the process's exit waits for (glibc tries each name of the search list for timeout x
 * attempts). The connect timed out after 10 s, but the run did not end until the lookups gave
 * up: at start-up `exit 1` came only then, and a run SIGTERMed after its connections were cut
 * stayed up past the kubelet's SIGKILL (137, not 75). The name is now looked up in a child
 * that the connect timeout kills (src/ledger/postgres/socket.ts), as for the Pushgateway
 * (push-dns-hangs.test.ts, whose silent DNS and mount namespace this borrows; here /etc/hosts
 * is bind-mounted too, so the name resolves until the test takes it out).
 * Needs root, unshare and PostgreSQL.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, FIXTURES, spawnCliRaw, workspace, type Workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';
import { canUnshare, useSilentDns } from '../helpers/silent-dns.js';
import { filesIn, until } from '../helpers/wait.js';

const slow = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];
const HOST = 'db.cronsafe-test.example';
// SIGKILL 10 s after SIGTERM. One lookup against the silent DNS takes 60 s (glibc's
// longest timeout, 30 s, twice): far past the grace period and the connect timeout (10 s).
// The drain's last resort exits a sixth of the margin before the SIGKILL: 1 s here (a 3 s
// margin left 0.5 s, and six runs on two cores exited 0.54 s late).
const DRAIN = { gracePeriodSeconds: 10, marginSeconds: 6 };
const RESOLV = 'options timeout:30 attempts:2\n';

const silentDns = useSilentDns();

describe.skipIf(!canUnshare || PG_SKIP_REASON !== undefined)('state.postgres by a host name the DNS never answers for', () => {
  const pg = usePostgresDatabase('dnshang');

  /** `cronsafe run` with the workspace's resolv.conf and hosts over the machine's, in its own mount namespace. */
  async function runWith(ws: Workspace, hosts: string, env: Record<string, string> = {}) {
    writeFileSync(path.join(ws.dir, 'resolv.conf'), `nameserver ${await silentDns()}\n${RESOLV}`);
    writeFileSync(path.join(ws.dir, 'hosts'), hosts);
    const script = 'mount --bind "$1" /etc/resolv.conf && mount --bind "$2" /etc/hosts && shift 2 && exec "$@"';
    const files = [path.join(ws.dir, 'resolv.conf'), path.join(ws.dir, 'hosts')];
    return spawnCliRaw('unshare', ['-m', 'sh', '-c', script, 'sh', ...files, process.execPath, CLI, 'run', '-c', ws.configPath], { env, timeoutMs: 90_000 });
  }
  const byName = () => pg.url.replace('postgres@127.0.0.1', `postgres:hunter2-secret@${HOST}`);

  it('at start-up: exit 1 naming host:port (no password) once the connect times out, not when the lookups give up', async () => {
    const ws = workspace({ handler: { command: slow }, state: { postgres: byName() }, drain: DRAIN }, { 'a.txt': 'a' });
    const startedAt = performance.now();
    const run = await runWith(ws, '127.0.0.1 localhost\n');
    const { code, signal } = await run.exited;
    const elapsed = performance.now() - startedAt;
    expect({ code, signal }, run.stderr()).toEqual({ code: 1, signal: null });
    expect(run.stderr()).toContain(`take the run lock on PostgreSQL ${HOST}:${pg.server.port}/dnshang as postgres`);
    expect(run.stderr()).toContain(`looking up ${HOST}: the DNS did not answer`);
    expect(run.stderr() + run.stdout()).not.toContain('hunter2');
    expect(elapsed, 'exited at the connect timeout (10 s), not after the 60 s lookup').toBeLessThan(40_000);
  }, 100_000);

  it('mid-run, its sessions cut: a SIGTERMed run exits 75 within the grace period, not when the lookups give up', async () => {
    const ws = workspace(
      { handler: { command: slow }, concurrency: 1, state: { postgres: byName() }, drain: DRAIN },
      Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`item-${i}.txt`, `item ${i}`])),
    );
    const markers = path.join(ws.dir, 'markers');
    const run = await runWith(ws, `127.0.0.1 localhost\n127.0.0.1 ${HOST}\n`, { MARKER_DIR: markers, SLOW_MS: '1500' });
    await until(() => filesIn(markers).some((f) => f.endsWith('.started')), 'a handler to start', 30_000);
    // The name is now the DNS's to answer (glibc reads /etc/hosts at every lookup), and every
    // session is cut: each reconnect looks it up.
    writeFileSync(path.join(ws.dir, 'hosts'), '127.0.0.1 localhost\n');
    await pg.server.admin(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'cronsafe%'`);
    await run.waitFor((l) => l.msg === 'run lock session lost; taking the lock again', 20_000);
    const stoppedAt = performance.now();
    run.child.kill('SIGTERM');
    const { code, signal } = await run.exited;
    const elapsed = performance.now() - stoppedAt;
    expect({ code, signal }, run.stderr()).toEqual({ code: 75, signal: null });
    expect(run.stderr() + run.stdout()).not.toContain('hunter2');
    expect(elapsed, "exited before the kubelet's SIGKILL (gracePeriodSeconds after the SIGTERM)").toBeLessThan(DRAIN.gracePeriodSeconds * 1000);
  }, 100_000);
});
