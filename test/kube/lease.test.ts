/**
 * The Lease lock through @kubernetes/client-node against the fake API server, which
 * enforces resourceVersion conflicts, 404s and the MicroTime format as a real one does.
 */
import { spawnSync } from 'node:child_process';
import { getEventListeners } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createServer as tlsServer, type Server as TlsServer } from 'node:tls';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MAX_TIMER_SECONDS } from '../../src/config/schema-fields.js';
import type { Config } from '../../src/config/types.js';
import { apiFailure, connectKube, SERVICE_ACCOUNT_DIR, type Kube } from '../../src/kube/client.js';
import { acquireLease, type LeaseAcquire, type LeaseLockOptions } from '../../src/kube/lease/lock.js';
import { acquireRunLease, earlierPodWait, releaseBoundMs } from '../../src/kube/lease/run-lease.js';
import { MICRO_TIME_RE } from '../../src/kube/lease/state.js';
import { FakeApiServer, startFakeApiServer, TOKEN, type Obj } from '../helpers/fake-apiserver.js';
import { memoryLogger } from '../helpers/log.js';
import { until } from '../helpers/wait.js';

let fake: FakeApiServer;
let kube: Kube;
const held: Array<Extract<LeaseAcquire, { status: 'acquired' }>> = [];

beforeEach(async () => {
  fake = await startFakeApiServer('batch');
  const c = await connectKube({ env: { KUBECONFIG: fake.kubeconfig }, timeoutMs: 2000 });
  if (!c.ok) throw new Error(c.reason);
  kube = c.kube;
});

afterEach(async () => {
  for (const h of held.splice(0)) await h.lease.release();
  await fake.close();
});

function opts(identity: string, over: Partial<LeaseLockOptions> = {}): LeaseLockOptions {
  return { kube, name: 'qc', namespace: 'batch', identity, durationSeconds: 60, renewSeconds: 20, log: memoryLogger().log, ...over };
}

async function acquire(identity: string, over: Partial<LeaseLockOptions> = {}): Promise<LeaseAcquire> {
  const r = await acquireLease(opts(identity, over));
  if (r.status === 'acquired') held.push(r);
  return r;
}

const leaseWrites = () => fake.requests.filter((r) => r.resource === 'leases' && (r.verb === 'create' || r.verb === 'update'));
const stored = (name = 'qc'): Obj => fake.get('leases', name) as Obj;

describe('acquire', () => {
  it('creates a missing Lease naming this run as holder, with 6-digit MicroTimes', async () => {
    const r = await acquire('pod-a/run-1', { durationSeconds: 45 });
    expect(r.status).toBe('acquired');
    expect(stored().spec).toMatchObject({ holderIdentity: 'pod-a/run-1', leaseDurationSeconds: 45, leaseTransitions: 0 });
    const sent = JSON.parse(leaseWrites()[0]!.body) as Obj;
    expect(sent.spec.acquireTime).toMatch(MICRO_TIME_RE);
    expect(sent.spec.renewTime).toMatch(MICRO_TIME_RE);
  });

  it('the fake rejects a 3-digit time, as a real API server does (so the test above can fail)', async () => {
    const plainDate = new Date();
    const body = { metadata: { name: 'x' }, spec: { holderIdentity: 'a', renewTime: plainDate } };
    await expect(kube.coordination.createNamespacedLease({ namespace: 'batch', body }, kube.options())).rejects.toMatchObject({ code: 400 });
    expect(fake.requests.at(-1)?.body).toMatch(/"renewTime":"[^"]*\.\d{3}Z"/);
  });

  it('the fake refuses a duration that is no int32 (400), as a real API server does; the longest durationSeconds the config allows is taken', async () => {
    for (const d of [2 ** 31, 1.5]) {
      const body = { metadata: { name: 'x' }, spec: { holderIdentity: 'a', leaseDurationSeconds: d } };
      await expect(kube.coordination.createNamespacedLease({ namespace: 'batch', body }, kube.options()), String(d)).rejects.toMatchObject({ code: 400 });
    }
    expect(await acquire('pod-a/run-1', { durationSeconds: MAX_TIMER_SECONDS })).toMatchObject({ status: 'acquired' });
    expect(stored().spec.leaseDurationSeconds).toBe(MAX_TIMER_SECONDS);
  });

  it('the fake refuses a Lease name that is not a DNS subdomain (422), on create and on create-on-update, as a real API server does', async () => {
    const body = (name: string) => ({ metadata: { name }, spec: { holderIdentity: 'a', leaseDurationSeconds: 10 } });
    await expect(kube.coordination.createNamespacedLease({ namespace: 'batch', body: body('Nightly_QC') }, kube.options())).rejects.toMatchObject({ code: 422 });
    await expect(kube.coordination.replaceNamespacedLease({ name: 'qc-', namespace: 'batch', body: body('qc-') }, kube.options())).rejects.toMatchObject({ code: 422 });
    expect(fake.list('leases')).toEqual([]);
    // lock.kubernetesLease.name is checked against the same rule by the config (exit 78), so a run never sends one.
  });

  it('a Lease held by another run and not expired is not taken: its holder and expiry are reported', async () => {
    await acquire('pod-a/run-1', { durationSeconds: 60 });
    const r = await acquire('pod-b/run-2');
    expect(r).toMatchObject({ status: 'held', holder: 'pod-a/run-1' });
    if (r.status !== 'held') throw new Error('unreachable');
    expect(r.expiresAt!.getTime()).toBeGreaterThan(Date.now() + 50_000);
    expect(stored().spec.holderIdentity).toBe('pod-a/run-1');
  });

  it('an expired Lease is taken over by a replace carrying the read resourceVersion', async () => {
    await acquire('pod-a/run-1', { durationSeconds: 30, renewSeconds: 3600 });
    const before = stored().metadata.resourceVersion as string;
    // B's clock is 31 s ahead: to B, A's renewTime + 30 s is in the past.
    const r = await acquire('pod-b/run-2', { now: () => Date.now() + 31_000 });
    expect(r.status).toBe('acquired');
    expect(stored().spec).toMatchObject({ holderIdentity: 'pod-b/run-2', leaseTransitions: 1 });
    const put = fake.requests.filter((q) => q.resource === 'leases' && q.verb === 'update').at(-1)!;
    expect((JSON.parse(put.body) as Obj).metadata.resourceVersion).toBe(before);
  });

  it('release clears the holder and lets the next run acquire at once', async () => {
    const a = await acquire('pod-a/run-1', { durationSeconds: 3600 });
    if (a.status !== 'acquired') throw new Error(a.status);
    await a.lease.release();
    expect(stored().spec.holderIdentity).toBeUndefined();
    expect(a.lease.lost.aborted).toBe(false);
    const b = await acquire('pod-b/run-2');
    expect(b.status).toBe('acquired');
    expect(stored().spec.holderIdentity).toBe('pod-b/run-2');
  });

  it('a release answered 503 (an API server restarting) is tried again within its bound: the holder is cleared', async () => {
    // Given up at the first 503, the Lease stayed held until it expired and the next run skipped.
    const { log, lines } = memoryLogger();
    const a = await acquire('pod-a/run-1', { durationSeconds: 3600, releaseTimeoutMs: 3000, log });
    if (a.status !== 'acquired') throw new Error(a.status);
    let refused = 0;
    fake.onRequest = (verb, resource) => {
      fake.down = resource === 'leases' && verb === 'update' && refused++ < 2;
    };
    await a.lease.release();
    fake.onRequest = () => undefined;
    expect(leaseWrites().filter((r) => r.verb === 'update').map((r) => r.status)).toEqual([503, 503, 200]);
    expect(stored().spec.holderIdentity).toBeUndefined();
    expect(lines.filter((l) => String(l.msg).includes('could not release'))).toEqual([]);
    expect(lines.filter((l) => l.msg === 'Kubernetes Lease released')).toHaveLength(1);
  });

  it('a release answered 409 because a renewal cut short by it landed after all is read again: still ours, it is released', async () => {
    const { log, lines } = memoryLogger();
    const a = await acquire('pod-a/run-1', { durationSeconds: 3600, releaseTimeoutMs: 3000, log });
    if (a.status !== 'acquired') throw new Error(a.status);
    stored().metadata.resourceVersion = '99999'; // as if that renewal had been written, its answer lost
    await a.lease.release();
    expect(leaseWrites().filter((r) => r.verb === 'update').map((r) => r.status)).toEqual([409, 200]);
    expect(stored().spec.holderIdentity).toBeUndefined();
    expect(lines.filter((l) => String(l.msg).includes('could not release'))).toEqual([]);
  });

  it('a release answered 409 by a Lease another run holds leaves it to that run, without a warning', async () => {
    const { log, lines } = memoryLogger();
    const a = await acquire('pod-a/run-1', { durationSeconds: 3600, releaseTimeoutMs: 3000, log });
    if (a.status !== 'acquired') throw new Error(a.status);
    stored().metadata.resourceVersion = '99999';
    stored().spec.holderIdentity = 'pod-z/other';
    await a.lease.release();
    expect(leaseWrites().filter((r) => r.verb === 'update').map((r) => r.status)).toEqual([409]);
    expect(stored().spec.holderIdentity).toBe('pod-z/other');
    expect(lines.filter((l) => String(l.msg).includes('could not release'))).toEqual([]);
  });

  it('a release of a Lease deleted meanwhile (kubectl delete lease) is not a warning: nobody holds it', async () => {
    const { log, lines } = memoryLogger();
    const a = await acquire('pod-a/run-1', { durationSeconds: 3600, releaseTimeoutMs: 3000, log });
    if (a.status !== 'acquired') throw new Error(a.status);
    fake.store.get('leases')!.clear();
    await a.lease.release();
    expect(lines.filter((l) => String(l.msg).includes('could not release'))).toEqual([]);
    expect(lines.filter((l) => l.msg === 'Kubernetes Lease: not released, it was deleted')).toHaveLength(1);
    expect(fake.get('leases', 'qc')).toBeUndefined(); // not re-created
  });

  it('a release refused 403 (RBAC with create but not update, a run shorter than renewSeconds) says what to grant', async () => {
    const { log, lines } = memoryLogger();
    const a = await acquire('pod-a/run-1', { log });
    if (a.status !== 'acquired') throw new Error(a.status);
    held.splice(0);
    fake.deny('update', 'leases');
    await a.lease.release();
    const warning = lines.find((l) => String(l.msg).includes('could not release'));
    expect(String(warning?.err)).toContain('cannot update resource "leases"');
    expect(warning?.msg).toContain('grant update on leases');
  });

  it('a release meeting an API server that stays down gives up at its bound, with one warning', async () => {
    const { log, lines } = memoryLogger();
    const a = await acquire('pod-a/run-1', { durationSeconds: 3600, releaseTimeoutMs: 1000, log });
    if (a.status !== 'acquired') throw new Error(a.status);
    fake.down = true;
    const started = performance.now();
    await a.lease.release();
    expect(performance.now() - started).toBeLessThan(1300);
    fake.down = false;
    expect(leaseWrites().filter((r) => r.verb === 'update' && r.status === 503).length).toBeGreaterThanOrEqual(2);
    expect(lines.filter((l) => String(l.msg).includes('could not release'))).toHaveLength(1);
  });

  it('RBAC denial or an unreachable API server is reported as unavailable, not as held', async () => {
    fake.deny('get', 'leases');
    expect(await acquire('pod-a/run-1')).toMatchObject({ status: 'unavailable', failure: { kind: 'forbidden', status: 403 } });
    fake.allow('get', 'leases');
    fake.deny('create', 'leases');
    expect(await acquire('pod-a/run-1')).toMatchObject({ status: 'unavailable', failure: { kind: 'forbidden' } });
    await fake.close();
    // Tried again for a while first (acquireRetryMs, shortened here), as a restarting API server is.
    expect(await acquire('pod-a/run-1', { acquireRetryMs: 500 })).toMatchObject({ status: 'unavailable', failure: { kind: 'unreachable' } });
    fake = await startFakeApiServer(); // for afterEach
  });
});

describe('a Lease held by an earlier pod of the same Job', () => {
  it('is waited for until it expires (within our duration) only when its holder is named as a pod of this Job', () => {
    const me = { jobName: 'qc-29000000', podName: 'qc-29000000-hjklm' };
    const at = (ms: number) => new Date(1_000_000 + ms);
    expect(earlierPodWait('qc-29000000-bcdfg/run-1', at(60_000), me, 90, 1_000_000)).toBe(60_250);
    // Another Job's pod (a manual Job, another fire), this very pod, no Job name, a foreign holder.
    for (const holder of ['qc-manual-1-bcdfg/run-1', 'qc-29000001-bcdfg/run-1', 'qc-29000000-hjklm/run-1', 'qc-29000000-abcde/run-1', 'pod-z/other-node', 'qc-29000000-bcdfgh/run-1']) {
      expect(earlierPodWait(holder, at(60_000), me, 90, 1_000_000), holder).toBeUndefined();
    }
    expect(earlierPodWait('qc-29000000-bcdfg/run-1', at(60_000), { podName: 'qc-29000000-hjklm' }, 90, 1_000_000)).toBeUndefined();
    // A longer Lease than ours (another config): not waited for.
    expect(earlierPodWait('qc-29000000-bcdfg/run-1', at(120_000), me, 90, 1_000_000)).toBeUndefined();
    // A Job name of 63 characters: its pods are named from its first 57 and a "-" (58), then 5.
    const long = `${'a'.repeat(52)}-29000000`.slice(0, 63);
    const pod = `${`${long}-`.slice(0, 58)}bcdfg`;
    expect(earlierPodWait(`${pod}/run-1`, at(1000), { jobName: long, podName: `${`${long}-`.slice(0, 58)}hjklm` }, 90, 1_000_000)).toBe(1250);
  });
});

describe('the bound of the release at the end of a run', () => {
  const config = { drain: { gracePeriodSeconds: 30, marginSeconds: 5 } };
  it('5 s when the run was not stopped; after a stop, what is left of the grace period less half the margin, between a quarter of the margin and 5 s', () => {
    const stop = new AbortController();
    const force = new AbortController();
    expect(releaseBoundMs(config, { stop: stop.signal, force: force.signal }, 1000)).toBe(5000);
    expect(releaseBoundMs(config, {}, 1000)).toBe(5000);
    stop.abort();
    expect(releaseBoundMs(config, { stop: stop.signal, stoppedMono: 0 }, 2000)).toBe(5000); // items done 2 s after the SIGTERM
    expect(releaseBoundMs(config, { stop: stop.signal, stoppedMono: 0 }, 25_000)).toBe(2500); // until 27.5 s
    expect(releaseBoundMs(config, { stop: stop.signal, stoppedMono: 0 }, 28_000)).toBe(1250); // the drain ran to its end: a quarter of the margin
    expect(releaseBoundMs(config, { stop: stop.signal }, 2000)).toBe(1250); // stopped before the Lease was asked for
    force.abort(); // a second signal: the run ends a margin later
    expect(releaseBoundMs(config, { stop: stop.signal, force: force.signal, stoppedMono: 0 }, 2000)).toBe(1250);
  });
});

it('a daemon\'s runs share one stop signal: each run\'s Lease leaves no listener on it (no leak, no MaxListenersExceededWarning)', async () => {
  const stop = new AbortController();
  const config = { drain: { gracePeriodSeconds: 30, marginSeconds: 5 }, lock: { kubernetesLease: { name: 'qc', durationSeconds: 60, renewSeconds: 20 } } } as unknown as Config;
  for (let i = 0; i < 3; i++) {
    const held = (await acquireRunLease(config, memoryLogger().log, `run-${i}`, stop.signal, { KUBECONFIG: fake.kubeconfig, CRONSAFE_POD_NAME: 'pod-a' })).held;
    expect(held).toBeDefined();
    await held!.release();
  }
  expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);
});

// RBAC is granted in the pod's namespace. A pod that cannot tell its namespace (run without
// the chart's downward API env, with a projected token that has no namespace file) asks in
// `default`: the 403 then read as missing RBAC, and "grant get, update and create" did not help.
it.skipIf(existsSync(`${SERVICE_ACCOUNT_DIR}/namespace`))('a 403 in the namespace "default" taken for want of any other says so, and how to name it', async () => {
  const kc = path.join(mkdtempSync(path.join(tmpdir(), 'cronsafe-kc-')), 'config');
  writeFileSync(kc, readFileSync(fake.kubeconfig, 'utf8').replace(/, namespace: batch/, ''));
  fake.deny('get', 'leases');
  const config = { drain: { gracePeriodSeconds: 30, marginSeconds: 5 }, lock: { kubernetesLease: { name: 'qc', durationSeconds: 60, renewSeconds: 20 } } } as unknown as Config;
  const { log, lines } = memoryLogger();
  expect(await acquireRunLease(config, log, 'run-1', undefined, { KUBECONFIG: kc, CRONSAFE_POD_NAME: 'pod-a' })).toEqual({});
  expect(fake.requests.map((r) => r.path)).toEqual(['/apis/coordination.k8s.io/v1/namespaces/default/leases/qc']);
  const reason = String(lines.find((l) => String(l.msg).startsWith('Kubernetes Lease unavailable'))?.reason);
  expect(reason).toContain('in the namespace "default"');
  expect(reason).toContain('the namespace is "default" only because none was found');
  expect(reason).toContain('set lock.kubernetesLease.namespace or CRONSAFE_POD_NAMESPACE');
  // Named (the pod's env, the config, the context): the plain RBAC hint.
  const named = memoryLogger();
  await acquireRunLease(config, named.log, 'run-2', undefined, { KUBECONFIG: kc, CRONSAFE_POD_NAME: 'pod-a', CRONSAFE_POD_NAMESPACE: 'batch' });
  expect(String(named.lines.find((l) => String(l.msg).startsWith('Kubernetes Lease unavailable'))?.reason)).not.toContain('only because none was found');
});

describe('acquire on a struggling API server', () => {
  // A 503 (an API server restarting behind its load balancer) or a 429 (throttled) says
  // nothing about who holds the Lease. Taken at once for "unavailable", one such answer let
  // the run go on with the local lock alone, beside the run on another node holding the Lease.
  it('a 503 on the read is tried again: a Lease held elsewhere is then seen held, not given up for the local lock', async () => {
    await acquire('pod-z/holder', { durationSeconds: 3600 });
    fake.down = true;
    fake.onRequest = () => {
      if (fake.down) setTimeout(() => (fake.down = false), 500); // back after a moment
    };
    const { log, lines } = memoryLogger();
    const r = await acquire('pod-a/run-1', { log });
    expect(r).toMatchObject({ status: 'held', holder: 'pod-z/holder' });
    expect(fake.requests.filter((q) => q.status === 503).length).toBeGreaterThanOrEqual(1);
    expect(lines.filter((l) => String(l.msg).includes('cannot answer now; trying again'))).toHaveLength(1);
  });

  it('no answer at all (connections cut: the API server restarting; or none in time) is tried again too', async () => {
    await acquire('pod-z/holder', { durationSeconds: 3600 });
    fake.refuse = true;
    setTimeout(() => (fake.refuse = false), 500); // back after a moment
    const { log, lines } = memoryLogger();
    expect(await acquire('pod-a/run-1', { log })).toMatchObject({ status: 'held', holder: 'pod-z/holder' });
    expect(lines.filter((l) => String(l.msg).includes('cannot answer now; trying again'))).toHaveLength(1);
    // A read that times out (2 s here) the same way.
    let first = true;
    fake.latency = () => (first ? ((first = false), 3000) : 0);
    expect(await acquire('pod-a/run-1')).toMatchObject({ status: 'held', holder: 'pod-z/holder' });
  }, 15_000);

  // A TLS handshake that fails verification reached the API server: a CA that is not the
  // cluster's (rotated, another cluster's, a TLS-inspecting proxy) does not pass in a moment.
  // It was "cannot reach the API server (DEPTH_ZERO_SELF_SIGNED_CERT)", tried again for 10 s
  // at every start.
  it.skipIf(spawnSync('openssl', ['version']).status !== 0)('a server certificate the kubeconfig\'s CA does not verify is unavailable at once, said so, not tried again as unreachable', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-tls-'));
    const selfSigned = (name: string, san: string) => {
      const r = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${name}`, '-addext', `subjectAltName=${san}`,
        '-keyout', path.join(dir, `${name}.key`), '-out', path.join(dir, `${name}.pem`)], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(r.stderr);
      return path.join(dir, `${name}.pem`);
    };
    const serverCert = selfSigned('apiserver', 'IP:127.0.0.1');
    const otherCa = selfSigned('other', 'DNS:other');
    // TLS in front of the fake API server, as a real one serves.
    const tls: TlsServer = tlsServer({ key: readFileSync(path.join(dir, 'apiserver.key')), cert: readFileSync(serverCert) }, (client) => {
      const upstream = netConnect(fake.port, '127.0.0.1');
      client.pipe(upstream).pipe(client);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
    });
    await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
    try {
      const port = (tls.address() as { port: number }).port;
      const connectWith = async (ca: string) => {
        const file = path.join(dir, `kubeconfig-${path.basename(ca)}`);
        writeFileSync(file, `apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: "https://127.0.0.1:${port}", certificate-authority: ${ca}}\nusers:\n- name: u\n  user: {token: ${TOKEN}}\ncontexts:\n- name: x\n  context: {cluster: c, user: u, namespace: batch}\ncurrent-context: x\n`);
        const c = await connectKube({ env: { KUBECONFIG: file }, timeoutMs: 2000 });
        if (!c.ok) throw new Error(c.reason);
        return c.kube;
      };
      // The way through works: with the CA that signed the server's certificate, the Lease is taken.
      expect(await acquire('pod-a/run-1', { kube: await connectWith(serverCert) })).toMatchObject({ status: 'acquired' });
      const { log, lines } = memoryLogger();
      const r = await acquire('pod-b/run-2', { kube: await connectWith(otherCa), log });
      expect(r).toMatchObject({ status: 'unavailable', failure: { kind: 'unauthorized', message: expect.stringContaining("the API server's certificate is not trusted") as string } });
      expect(lines.filter((l) => String(l.msg).includes('cannot answer now; trying again'))).toEqual([]);
    } finally {
      for (const h of held.splice(0)) await h.lease.release();
      await new Promise<void>((resolve) => tls.close(() => resolve()));
    }
  }, 20_000);

  it('a stop during the wait between tries ends the acquire at once, with no write', async () => {
    fake.down = true;
    const stop = new AbortController();
    fake.onRequest = () => setTimeout(() => stop.abort('SIGTERM'), 50);
    const started = performance.now();
    const r = await acquire('pod-a/run-1', { stop: stop.signal });
    expect(r.status).toBe('stopped');
    expect(performance.now() - started).toBeLessThan(1500);
    expect(leaseWrites()).toEqual([]);
  });

  it('a stop that came while a write was answered 503 ends the acquire at once, without the wait', async () => {
    const stop = new AbortController();
    fake.onRequest = (verb) => {
      if (verb !== 'create') return;
      fake.down = true;
      stop.abort('SIGTERM');
    };
    const started = performance.now();
    const r = await acquire('pod-a/run-1', { stop: stop.signal });
    expect(r.status).toBe('stopped');
    expect(performance.now() - started).toBeLessThan(1500);
    expect(leaseWrites()).toHaveLength(1);
  });

  it('a Lease deleted between the read and the takeover is free: it is created, not reported held by nobody', async () => {
    fake.seed('leases', { metadata: { name: 'qc' }, spec: { holderIdentity: '', leaseDurationSeconds: 60 } });
    fake.onRequest = (verb) => {
      if (verb === 'update') fake.store.get('leases')!.clear(); // `kubectl delete lease` just then
    };
    const r = await acquire('pod-a/run-1');
    fake.onRequest = () => undefined;
    expect(r.status).toBe('acquired');
    expect(stored().spec.holderIdentity).toBe('pod-a/run-1');
  });

  it.each([
    ['free (released)', { holderIdentity: '', leaseDurationSeconds: 60 }],
    ['expired', { holderIdentity: 'pod-old/run-0', renewTime: '2020-01-01T00:00:00.000000Z', leaseDurationSeconds: 60 }],
  ])('a Lease that is %s, annotated between the read and the takeover (kubectl annotate), is taken, not reported held', async (_what, spec) => {
    fake.seed('leases', { metadata: { name: 'qc' }, spec });
    let annotated = false;
    fake.onRequest = (verb) => {
      if (verb !== 'update' || annotated) return;
      annotated = true;
      const l = stored();
      l.metadata.annotations = { note: 'x' };
      l.metadata.resourceVersion = String(Number(l.metadata.resourceVersion) + 1000);
    };
    const r = await acquire('pod-a/run-1');
    fake.onRequest = () => undefined;
    expect(r.status).toBe('acquired');
    expect(stored().spec.holderIdentity).toBe('pod-a/run-1');
    expect(stored().metadata.annotations).toEqual({ note: 'x' });
  });

  // The rounds the acquire gives a Lease that stays free after a refused write are its own:
  // counted with the rounds spent on 503s before, one annotate after two 503s ended the
  // acquire as "held" by nobody, and the run skipped (exit 0) with its backlog left.
  it('a free Lease annotated under the takeover after two 503s on the read is taken, not reported held by nobody', async () => {
    fake.seed('leases', { metadata: { name: 'qc' }, spec: { holderIdentity: '', leaseDurationSeconds: 60 } });
    let reads = 0;
    let annotated = false;
    fake.onRequest = (verb) => {
      if (verb === 'get') fake.down = ++reads <= 2; // an API server restarting, back for the third read
      if (verb !== 'update' || annotated) return;
      annotated = true;
      const l = stored();
      l.metadata.annotations = { note: 'x' };
      l.metadata.resourceVersion = String(Number(l.metadata.resourceVersion) + 1000);
    };
    const r = await acquire('pod-a/run-1');
    fake.onRequest = () => undefined;
    expect(r.status).toBe('acquired');
    expect(fake.requests.filter((q) => q.status === 503)).toHaveLength(2);
    expect(stored().spec.holderIdentity).toBe('pod-a/run-1');
  }, 15_000);

  // A write that got no answer in time (the client's 2 s here) but that the API server
  // executed later names this run. Taken for free, the takeover's 409s (kubectl annotate
  // under each write) used up the rounds: "held" by nobody, the run skipped (exit 0) with
  // its backlog left, and the Lease naming it blocked every run until it expired.
  it('a Lease that names this run after a refused write (its own write landed, answer lost) is held and renewed, not reported held by nobody', async () => {
    fake.dropAbandoned = false;
    let requests = 0;
    fake.latency = () => (++requests === 2 ? 3000 : 0); // the create: executed after the client gave up
    let bumps = 0;
    fake.onRequest = (verb, resource) => {
      if (resource !== 'leases' || verb !== 'update' || bumps >= 3) return;
      bumps++;
      const l = stored();
      l.metadata.annotations = { touched: String(bumps) };
      l.metadata.resourceVersion = String(Number(l.metadata.resourceVersion) + 1000);
    };
    const { log, lines } = memoryLogger();
    const r = await acquire('pod-a/run-1', { durationSeconds: 30, renewSeconds: 0.5, log });
    expect(r.status).toBe('acquired');
    expect(fake.requests.filter((q) => q.verb === 'create')).toHaveLength(1);
    expect(lines.some((l) => String(l.msg).includes('had taken it after all; holding it'))).toBe(true);
    if (r.status !== 'acquired') return;
    // Its renewals carry the resourceVersion it read, and land.
    const writes = fake.requests.length;
    await until(() => fake.requests.slice(writes).some((q) => q.verb === 'update' && q.status === 200), 'a renewal to land');
    expect(r.lease.lost.aborted).toBe(false);
    expect(stored().spec.holderIdentity).toBe('pod-a/run-1');
    await r.lease.release();
    expect(stored().spec.holderIdentity).toBeUndefined();
  }, 20_000);

  it('a stop (SIGTERM) while a refused takeover reads who won ends the acquire as stopped, not as held (a skip, exit 0)', async () => {
    fake.seed('leases', { metadata: { name: 'qc' }, spec: { holderIdentity: '', leaseDurationSeconds: 60 } });
    const stop = new AbortController();
    let reads = 0;
    fake.onRequest = (verb) => {
      if (verb === 'update') {
        const l = stored();
        l.metadata.resourceVersion = String(Number(l.metadata.resourceVersion) + 1000);
      }
      if (verb === 'get' && ++reads === 2) stop.abort(); // the read after the 409
    };
    const r = await acquire('pod-a/run-1', { stop: stop.signal });
    expect(r.status).toBe('stopped');
  });

  it('a takeover refused 409 because another run took the Lease meanwhile: held, naming it and its expiry', async () => {
    fake.seed('leases', { metadata: { name: 'qc' }, spec: { holderIdentity: '', leaseDurationSeconds: 60 } });
    fake.onRequest = (verb) => {
      if (verb !== 'update') return;
      fake.onRequest = () => undefined;
      const l = stored();
      l.spec = { holderIdentity: 'pod-b/run-2', renewTime: new Date().toISOString().replace(/Z$/, '000Z'), leaseDurationSeconds: 60 };
      l.metadata.resourceVersion = String(Number(l.metadata.resourceVersion) + 1000);
    };
    const r = await acquire('pod-a/run-1');
    expect(r).toMatchObject({ status: 'held', holder: 'pod-b/run-2' });
    expect(r.status === 'held' && r.expiresAt).toBeInstanceOf(Date);
  });

  it('an API server that stays down: tried again for a bounded time, then unavailable (the run goes on with the local lock)', async () => {
    fake.down = true;
    const started = performance.now();
    const r = await acquire('pod-a/run-1', { acquireRetryMs: 2500 });
    expect(r).toMatchObject({ status: 'unavailable', failure: { kind: 'server', status: 503 } });
    expect(performance.now() - started).toBeLessThan(4000);
    expect(fake.requests.length).toBeGreaterThanOrEqual(2);
    expect(leaseWrites()).toEqual([]);
  });

  it('RBAC denial (403) is not tried again: unavailable at once', async () => {
    fake.deny('get', 'leases');
    expect(await acquire('pod-a/run-1')).toMatchObject({ status: 'unavailable', failure: { kind: 'forbidden' } });
    expect(fake.requests).toHaveLength(1);
  });
});

describe('two contenders race for the same Lease: exactly one wins', () => {
  // Random latency interleaves the two read -> write sequences differently each round.
  beforeEach(() => {
    fake.latency = () => Math.floor(Math.random() * 4);
  });

  it('when it does not exist yet (both create; the loser gets 409 AlreadyExists)', async () => {
    let alreadyExists = 0;
    for (let i = 0; i < 40; i++) {
      const before = fake.requests.length;
      const name = `race-new-${i}`;
      const rs = await Promise.all([acquire(`a/${i}`, { name }), acquire(`b/${i}`, { name })]);
      const winners = rs.filter((r) => r.status === 'acquired');
      expect(winners, `round ${i}`).toHaveLength(1);
      const loser = rs.find((r) => r.status !== 'acquired');
      expect(loser?.status).toBe('held');
      expect(stored(name).spec.holderIdentity).toBe(rs[0].status === 'acquired' ? `a/${i}` : `b/${i}`);
      alreadyExists += fake.requests.slice(before).filter((r) => r.verb === 'create' && r.status === 409).length;
    }
    expect(alreadyExists).toBeGreaterThan(0);
  });

  it('when it is free (both replace with the same resourceVersion; the loser gets 409 Conflict)', async () => {
    let conflicts = 0;
    for (let i = 0; i < 40; i++) {
      const name = `race-free-${i}`;
      fake.seed('leases', { metadata: { name }, spec: { holderIdentity: '', leaseDurationSeconds: 60, leaseTransitions: 3 } });
      const before = fake.requests.length;
      const rs = await Promise.all([acquire(`a/${i}`, { name }), acquire(`b/${i}`, { name })]);
      expect(rs.filter((r) => r.status === 'acquired'), `round ${i}`).toHaveLength(1);
      expect(stored(name).spec.leaseTransitions).toBe(4);
      conflicts += fake.requests.slice(before).filter((r) => r.status === 409).length;
    }
    // Both read before either wrote in at least some rounds: the API server decided.
    expect(conflicts).toBeGreaterThan(0);
  });

  it('never writes blind: every update carries a resourceVersion (the fake refuses one without)', async () => {
    await acquire('a/1', { renewSeconds: 0.05, durationSeconds: 5 });
    await until(() => fake.requests.filter((r) => r.verb === 'update').length >= 3, 'a few renewals');
    for (const r of fake.requests.filter((q) => q.resource === 'leases' && q.verb === 'update')) {
      expect((JSON.parse(r.body) as Obj).metadata.resourceVersion).toMatch(/^\d+$/);
      expect(r.status).toBe(200);
    }
    const blind = { ...stored(), metadata: { ...stored().metadata, resourceVersion: undefined } };
    await expect(kube.coordination.replaceNamespacedLease({ name: 'qc', namespace: 'batch', body: blind }, kube.options())).rejects.toMatchObject({ code: 422 });
  });
});

describe('renewal and loss', () => {
  it('renews while held, with 6-digit MicroTimes and a new resourceVersion each time', async () => {
    const a = await acquire('pod-a/run-1', { durationSeconds: 1, renewSeconds: 0.1 });
    if (a.status !== 'acquired') throw new Error(a.status);
    const first = stored().spec.renewTime as string;
    await new Promise((r) => setTimeout(r, 1500)); // past one duration: only renewals keep it
    expect(a.lease.lost.aborted).toBe(false);
    expect(stored().spec.holderIdentity).toBe('pod-a/run-1');
    expect(Date.parse(stored().spec.renewTime as string)).toBeGreaterThan(Date.parse(first));
    const renewals = fake.requests.filter((r) => r.verb === 'update');
    expect(renewals.length).toBeGreaterThanOrEqual(5);
    const versions = renewals.map((r) => (JSON.parse(r.body) as Obj).metadata.resourceVersion as string);
    expect(new Set(versions).size).toBe(versions.length);
    for (const r of renewals) expect((JSON.parse(r.body) as Obj).spec.renewTime).toMatch(MICRO_TIME_RE);
  });

  it('a holder that stops renewing loses it after the Lease duration, and another run takes over', async () => {
    // A never renews (renewSeconds far beyond the duration), as if its process had frozen.
    const a = await acquire('pod-a/run-1', { durationSeconds: 1, renewSeconds: 3600 });
    if (a.status !== 'acquired') throw new Error(a.status);
    expect((await acquire('pod-b/run-2')).status).toBe('held');
    const t0 = Date.now();
    await until(() => a.lease.lost.aborted, 'A to see its Lease lost', 3000);
    expect(Date.now() - t0).toBeLessThan(1500);
    expect(String(a.lease.lost.reason)).toContain('not renewed within the Lease duration');
    await until(() => Date.parse(stored().spec.renewTime as string) + 1000 < Date.now(), 'the Lease to expire', 3000);
    expect(await acquire('pod-b/run-2')).toMatchObject({ status: 'acquired' });
    expect(stored().spec).toMatchObject({ holderIdentity: 'pod-b/run-2', leaseTransitions: 1 });
  });

  it('a renewal after a conflicting takeover reports the Lease LOST', async () => {
    const a = await acquire('pod-a/run-1', { durationSeconds: 2, renewSeconds: 0.2 });
    if (a.status !== 'acquired') throw new Error(a.status);
    // B's clock runs 5 s ahead, so it sees A's Lease expired and takes it over.
    expect((await acquire('pod-b/run-2', { now: () => Date.now() + 5000, renewSeconds: 3600 })).status).toBe('acquired');
    await until(() => a.lease.lost.aborted, 'A to see its Lease lost', 3000);
    expect(String(a.lease.lost.reason)).toContain('taken over by pod-b/run-2');
    expect(fake.requests.some((r) => r.verb === 'update' && r.status === 409)).toBe(true);
    // A lost Lease is not released: that would clear B's hold.
    await a.lease.release();
    expect(stored().spec.holderIdentity).toBe('pod-b/run-2');
  });

  it('a Lease whose holder someone else cleared (kubectl patch: holderIdentity null) is LOST as released, not "taken over by another run"', async () => {
    // An operator freeing the Lease: nobody holds it, and another run may take it now, so the
    // run stops; but the reason sent the operator looking for a run that had taken it.
    const a = await acquire('pod-a/run-1', { durationSeconds: 5, renewSeconds: 0.1 });
    if (a.status !== 'acquired') throw new Error(a.status);
    const l = stored();
    delete l.spec.holderIdentity;
    l.metadata.resourceVersion = '999999';
    await until(() => a.lease.lost.aborted, 'A to see its Lease lost', 3000);
    expect(String(a.lease.lost.reason)).not.toContain('taken over');
    expect(String(a.lease.lost.reason)).toContain('holderIdentity cleared');
  });

  it('a deleted Lease is LOST too (its replace fails the uid precondition; it is not re-created)', async () => {
    const a = await acquire('pod-a/run-1', { durationSeconds: 5, renewSeconds: 0.1 });
    if (a.status !== 'acquired') throw new Error(a.status);
    fake.store.get('leases')!.clear();
    await until(() => a.lease.lost.aborted, 'A to see its Lease lost', 3000);
    expect(String(a.lease.lost.reason)).toContain('the Lease was deleted');
    expect(fake.get('leases', 'qc')).toBeUndefined();
  });

  it('the fake, like a real API server, creates a Lease on a PUT without uid (AllowCreateOnUpdate)', async () => {
    const body = { metadata: { name: 'put-created' }, spec: { holderIdentity: 'x', leaseDurationSeconds: 5 } };
    const made = await kube.coordination.replaceNamespacedLease({ name: 'put-created', namespace: 'batch', body }, kube.options());
    expect(made.metadata?.uid).toBeTruthy();
  });

  it('the fake can cut a request\'s connection unanswered (an API server stopping mid-request): the client sees it unreachable, and nothing was written', async () => {
    fake.cut = (verb) => verb === 'create';
    const err = await kube.coordination.createNamespacedLease({ namespace: 'batch', body: { metadata: { name: 'qc' }, spec: { holderIdentity: 'x' } } }, kube.options()).catch((e: unknown) => e);
    expect(apiFailure(err)).toMatchObject({ kind: 'unreachable' });
    expect(fake.get('leases', 'qc')).toBeUndefined();
    expect(fake.requests.map((r) => `${r.verb} ${r.status}`)).toEqual(['create 0']);
  });

  it('failing renewals are retried quietly until the duration passes, then LOST (one warning, not one per try)', async () => {
    const { log, lines } = memoryLogger();
    // A renew deadline of 2 s (two thirds of 3) holds ~19 tries 0.1 s apart: at least 3 even
    // when a loaded machine runs the timers and the fake's answers late (with 1 s, 2 were seen).
    const a = await acquire('pod-a/run-1', { durationSeconds: 3, renewSeconds: 0.1, log });
    if (a.status !== 'acquired') throw new Error(a.status);
    fake.deny('update', 'leases');
    await until(() => a.lease.lost.aborted, 'A to see its Lease lost', 15_000);
    expect(fake.requests.filter((r) => r.status === 403).length).toBeGreaterThanOrEqual(3);
    expect(lines.filter((l) => String(l.msg).includes('renewal failed'))).toHaveLength(1);
    // RBAC with create but not update: the warning says what to grant, as the acquire's does.
    expect(lines.find((l) => String(l.msg).includes('renewal failed'))!.msg).toContain('grant update on leases');
    expect(lines.filter((l) => String(l.msg).startsWith('Kubernetes Lease lost'))).toHaveLength(1);
  });

  it('a 409 caused by its own earlier write (answer lost) is recovered: still the holder, not LOST', async () => {
    const a = await acquire('pod-a/run-1', { durationSeconds: 2, renewSeconds: 0.1 });
    if (a.status !== 'acquired') throw new Error(a.status);
    // As if a renewal had landed but its answer never arrived: same holder, newer version.
    stored().metadata.resourceVersion = '99999';
    await until(() => fake.requests.some((r) => r.status === 409), 'a conflicting renewal');
    const conflict = fake.requests.findIndex((r) => r.status === 409);
    await until(() => fake.requests.slice(conflict).filter((r) => r.verb === 'update' && r.status === 200).length >= 2, 'renewals to succeed again');
    expect(a.lease.lost.aborted).toBe(false);
    expect(stored().spec.holderIdentity).toBe('pod-a/run-1');
  });

  // Another writer touching the Lease's metadata (`kubectl annotate`, a label sync) moves
  // its resourceVersion without taking it: a 409 that says nothing about who holds it.
  const annotateBeforeUpdates = (n: number) => {
    let left = n;
    fake.onRequest = (verb, resource) => {
      if (resource !== 'leases' || verb !== 'update' || left <= 0) return;
      left--;
      const l = stored();
      l.metadata.annotations = { ...l.metadata.annotations, touched: String(left) };
      l.metadata.resourceVersion = String(Number(l.metadata.resourceVersion) + 1000);
    };
    return () => left;
  };

  it('a renewal answered 409 twice while the Lease still names this run (kubectl annotate between its read and its retry) is not LOST', async () => {
    const { log, lines } = memoryLogger();
    const a = await acquire('pod-a/run-1', { durationSeconds: 3, renewSeconds: 0.1, log });
    if (a.status !== 'acquired') throw new Error(a.status);
    const left = annotateBeforeUpdates(2);
    await until(() => left() === 0, 'two renewals to conflict');
    const conflicts = fake.requests.length;
    await until(() => fake.requests.slice(conflicts).filter((r) => r.verb === 'update' && r.status === 200).length >= 2, 'renewals to succeed again');
    expect(a.lease.lost.aborted, String(a.lease.lost.reason)).toBe(false);
    expect(stored().spec.holderIdentity).toBe('pod-a/run-1');
    expect(stored().metadata.annotations).toEqual({ touched: '0' }); // the other writer's change is kept
    expect(lines.filter((l) => String(l.msg).includes('renewal failed'))).toEqual([]);
  });

  it('a Lease that keeps changing under a renewal while it names this run is a failed renewal, retried: kept if one lands before the expiry', async () => {
    const { log, lines } = memoryLogger();
    const a = await acquire('pod-a/run-1', { durationSeconds: 6, renewSeconds: 0.1, log });
    if (a.status !== 'acquired') throw new Error(a.status);
    const left = annotateBeforeUpdates(4); // more than one renewal's rereads
    await until(() => left() === 0, 'four writes to conflict');
    await until(() => lines.some((l) => String(l.msg).includes('renewed again')), 'a later renewal to land', 5000);
    expect(a.lease.lost.aborted, String(a.lease.lost.reason)).toBe(false);
    expect(stored().spec.holderIdentity).toBe('pod-a/run-1');
    expect(lines.filter((l) => String(l.msg).includes('renewal failed'))).toHaveLength(1);
  });

  it('a renewal answered 409 twice when the second read names another holder is LOST: never held beside it', async () => {
    const a = await acquire('pod-a/run-1', { durationSeconds: 5, renewSeconds: 0.1 });
    if (a.status !== 'acquired') throw new Error(a.status);
    let updates = 0;
    fake.onRequest = (verb, resource) => {
      if (resource !== 'leases' || verb !== 'update') return;
      updates++;
      const l = stored();
      l.metadata.resourceVersion = String(Number(l.metadata.resourceVersion) + 1000);
      if (updates === 2) l.spec.holderIdentity = 'pod-b/run-2'; // taken between the read and the retry
    };
    await until(() => a.lease.lost.aborted, 'A to see its Lease lost', 3000);
    expect(String(a.lease.lost.reason)).toContain('taken over by pod-b/run-2');
    fake.onRequest = () => undefined;
    await a.lease.release();
    expect(stored().spec.holderIdentity).toBe('pod-b/run-2');
  });

  it('a release answered 409 twice while the Lease still names this run (kubectl annotate) still clears the holder', async () => {
    const { log, lines } = memoryLogger();
    const a = await acquire('pod-a/run-1', { durationSeconds: 3600, renewSeconds: 3600, log });
    if (a.status !== 'acquired') throw new Error(a.status);
    held.splice(0);
    annotateBeforeUpdates(2);
    await a.lease.release();
    expect(stored().spec.holderIdentity).toBeUndefined();
    expect(lines.filter((l) => String(l.msg).includes('could not release') || String(l.msg).includes('not released'))).toEqual([]);
  });

  // A renewal's answer is lost when the API server is struggling, and then the read that
  // checks who holds the Lease may fail too. Nobody else holds it: that is a failed renewal
  // (retried until the Lease would expire), not a takeover.
  it('a 409 whose follow-up read fails too is retried, not LOST as "taken over"', async () => {
    const { log, lines } = memoryLogger();
    const a = await acquire('pod-a/run-1', { durationSeconds: 3, renewSeconds: 0.1, log });
    if (a.status !== 'acquired') throw new Error(a.status);
    fake.deny('get', 'leases');
    stored().metadata.resourceVersion = '99999';
    await until(() => fake.requests.filter((r) => r.verb === 'get' && r.status === 403).length >= 2, 'the read after a conflict to fail twice');
    fake.allow('get', 'leases');
    const allowed = fake.requests.length;
    await until(() => fake.requests.slice(allowed).filter((r) => r.verb === 'update' && r.status === 200).length >= 2, 'renewals to succeed again');
    expect(a.lease.lost.aborted, String(a.lease.lost.reason)).toBe(false);
    expect(stored().spec.holderIdentity).toBe('pod-a/run-1');
    expect(lines.filter((l) => String(l.msg).includes('renewal failed'))).toHaveLength(1);
  });

  // The end of a run often meets a renewal on the wire (a slow API server, renewSeconds 30).
  // That renewal lands and moves the resourceVersion; the release must carry the new one,
  // or a real API server answers 409 and the next run skips until the Lease expires.
  it('a step of the wall clock during a renewal call (NTP) neither stalls the renewals (back) nor loses the Lease (forward)', async () => {
    // Timed on the wall clock, a step back of an hour while a renewal was answered put the
    // next renewal and the expiry an hour off (the Lease lapsed on the API server while the
    // run went on as its holder); a step forward past the duration lost it at once.
    for (const step of [-3_600_000, 3_600_000]) {
      let offset = 0;
      const a = await acquire(`pod-a/run-${step}`, { name: `qc${step > 0 ? 'f' : 'b'}`, durationSeconds: 2, renewSeconds: 0.3, now: () => Date.now() + offset });
      if (a.status !== 'acquired') throw new Error(a.status);
      let calls = 0;
      fake.latency = () => {
        if (++calls === 1) offset = step;
        return 50;
      };
      await until(() => calls >= 5, 'renewals to go on after the step', 3000);
      expect(a.lease.lost.aborted, String(a.lease.lost.reason)).toBe(false);
      fake.latency = () => 0;
    }
  });

  it('release with a renewal hung in flight keeps to releaseTimeoutMs, not the whole renewal timeout', async () => {
    // Renewals wait up to 5 s (API_TIMEOUT_MS); the release waited for one in flight to end
    // before its own write, so after a drain on a hung API server it took 5 s plus its own
    // bound: past the margin, and a completed run was ended by the last resort (exit 75).
    const { log, lines } = memoryLogger();
    const a = await acquire('pod-a/run-1', { durationSeconds: 3600, renewSeconds: 0.2, releaseTimeoutMs: 300, log });
    if (a.status !== 'acquired') throw new Error(a.status);
    let onServer = false;
    fake.latency = () => {
      onServer = true;
      return 10_000;
    };
    await until(() => onServer, 'a renewal to reach the API server', 3000);
    const started = Date.now();
    await a.lease.release();
    expect(Date.now() - started).toBeLessThan(1500); // the connection's timeout here is 2 s
    expect(lines.filter((l) => String(l.msg).startsWith('Kubernetes Lease: renewal failed'))).toEqual([]);
    expect(lines.filter((l) => String(l.msg).includes('could not release'))).toHaveLength(1);
    fake.latency = () => 0;
  });

  it('a Lease lost at its expiry with a renewal hung in flight: the end of the run does not wait for that renewal', async () => {
    const a = await acquire('pod-a/run-1', { durationSeconds: 1, renewSeconds: 0.2, releaseTimeoutMs: 300 });
    if (a.status !== 'acquired') throw new Error(a.status);
    fake.latency = () => 10_000;
    await until(() => a.lease.lost.aborted, 'the Lease to be lost at its expiry', 3000);
    const started = Date.now();
    await a.lease.release();
    expect(Date.now() - started).toBeLessThan(500); // the connection's timeout here is 2 s
    fake.latency = () => 0;
  });

  it('release while a renewal is in flight still clears the holder', async () => {
    const { log, lines } = memoryLogger();
    const a = await acquire('pod-a/run-1', { durationSeconds: 3600, renewSeconds: 0.2, log });
    if (a.status !== 'acquired') throw new Error(a.status);
    let onServer = false;
    fake.latency = () => {
      onServer = true;
      return 400;
    };
    await until(() => onServer, 'a renewal to reach the API server', 3000);
    await a.lease.release();
    fake.latency = () => 0;
    expect(fake.requests.filter((r) => r.verb === 'update' && r.status === 409)).toEqual([]);
    expect(stored().spec.holderIdentity).toBeUndefined();
    expect(lines.filter((l) => String(l.msg).includes('could not release'))).toEqual([]);
    expect((await acquire('pod-b/run-2')).status).toBe('acquired');
  });
});
