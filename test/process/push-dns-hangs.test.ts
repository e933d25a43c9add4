/**
 * The cluster's DNS does not answer (CoreDNS overloaded, a node's network cut, NodeLocal
 * DNSCache down) while a run drains, with metrics.pushgateway given by host name, as it
 * always is in a cluster. Each push was cut off by its timeout, but Node's dns.lookup goes on
 * in a libuv thread that nothing stops, and the process's exit waits for it (glibc tries each
 * name of the search list for timeout x attempts: 40 s in a pod). The run logged
 * `run finished` and then stayed up past the kubelet's SIGKILL: 137 instead of 75, the Job
 * counting it toward backoffLimit. The name is now resolved in a child that the timeout kills.
 *
 * The DNS that does not answer is a UDP socket on a loopback address that reads and never
 * replies, named in a resolv.conf bind-mounted over /etc/resolv.conf in the CLI's own mount
 * namespace (unshare -m: the rest of the machine keeps its DNS). Needs root and unshare.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, FIXTURES, spawnCliRaw, workspace } from '../helpers/cli.js';
import { canUnshare, useSilentDns } from '../helpers/silent-dns.js';
import { filesIn, until } from '../helpers/wait.js';

const slow = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];

const silentDns = useSilentDns();

describe.skipIf(!canUnshare)('a Pushgateway whose host name the DNS never answers for', () => {
  it('a SIGTERMed run exits 75 within the grace period, not when the lookups give up', async () => {
    const dns = await silentDns();
    const ws = workspace(
      {
        handler: { command: slow },
        concurrency: 1,
        // SIGKILL 10 s after SIGTERM; the item in flight ends within 1.5 s, and a push is cut
        // off after 500 ms (margin / 4). One lookup against the silent DNS takes 10 s
        // (timeout 5 s, 2 attempts): the final push's kept the process up that long.
        drain: { gracePeriodSeconds: 10, marginSeconds: 2 },
        metrics: { pushgateway: 'http://pushgateway.cronsafe-test.example:9091' },
      },
      Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`item-${i}.scc`, `item ${i}`])),
    );
    const resolv = path.join(ws.dir, 'resolv.conf');
    writeFileSync(resolv, `nameserver ${dns}\noptions timeout:5 attempts:2\n`);
    const markers = path.join(ws.dir, 'markers');
    const run = spawnCliRaw(
      'unshare',
      ['-m', 'sh', '-c', 'mount --bind "$1" /etc/resolv.conf && shift && exec "$@"', 'sh', resolv, process.execPath, CLI, 'run', '-c', ws.configPath],
      { env: { MARKER_DIR: markers, SLOW_MS: '1500' }, timeoutMs: 90_000 },
    );
    await until(() => filesIn(markers).some((f) => f.endsWith('.started')), 'a handler to start');
    // The first push's lookup is on its way (and cut off): the DNS does not answer.
    await run.waitFor((l) => l.msg.startsWith('metrics push failed') && l.reason === 'run started', 20_000);
    const stoppedAt = performance.now();
    run.child.kill('SIGTERM');
    const { code, signal } = await run.exited;
    const elapsed = performance.now() - stoppedAt;
    expect({ code, signal }, run.stderr()).toEqual({ code: 75, signal: null });
    expect(run.lines.some((l) => l.msg === 'run finished' && l.outcome === 'drained')).toBe(true);
    expect(run.lines.filter((l) => l.msg.startsWith('metrics push failed') && l.reason === 'run drained')).toHaveLength(1);
    expect(elapsed, 'exited before the kubelet\'s SIGKILL (gracePeriodSeconds after the SIGTERM)').toBeLessThan(10_000);
  });
});
