/** Connecting to the API, who-am-I from the downward API, error classification, lazy loading. */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createServer as tlsServer } from 'node:tls';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { apiFailure, connectKube, podIdentity, requestTimeoutMs, SERVICE_ACCOUNT_DIR } from '../../src/kube/client.js';
import { ROOT } from '../helpers/cli.js';
import { FakeApiServer, startFakeApiServer, TOKEN } from '../helpers/fake-apiserver.js';

let fake: FakeApiServer;
beforeEach(async () => {
  fake = await startFakeApiServer('jobs-ns');
});
afterEach(async () => {
  await fake.close();
});

describe('podIdentity', () => {
  it('reads the chart\'s CRONSAFE_* downward API env first, then the plain names', () => {
    expect(podIdentity({ CRONSAFE_POD_NAME: 'a', POD_NAME: 'b', CRONSAFE_POD_NAMESPACE: 'n1', POD_NAMESPACE: 'n2', CRONSAFE_JOB_NAME: 'j', CRONSAFE_JOB_UID: 'u' }, '/nonexistent'))
      .toEqual({ podName: 'a', namespace: 'n1', jobName: 'j', jobUid: 'u' });
    expect(podIdentity({ POD_NAME: 'b', POD_NAMESPACE: 'n2', JOB_NAME: 'j2' }, '/nonexistent')).toEqual({ podName: 'b', namespace: 'n2', jobName: 'j2' });
  });

  it('takes the namespace from the service account when the env has none', () => {
    const root = mkdtempSync(path.join(tmpdir(), 'cronsafe-sa-'));
    mkdirSync(path.join(root, SERVICE_ACCOUNT_DIR), { recursive: true });
    writeFileSync(path.join(root, SERVICE_ACCOUNT_DIR, 'namespace'), 'from-sa\n');
    expect(podIdentity({}, root)).toEqual({ namespace: 'from-sa' });
    expect(podIdentity({ POD_NAMESPACE: 'env-wins' }, root).namespace).toBe('env-wins');
  });
});

describe('connectKube', () => {
  it('without any credentials says so instead of trying localhost:8080', async () => {
    const home = mkdtempSync(path.join(tmpdir(), 'cronsafe-home-'));
    const c = await connectKube({ env: { HOME: home }, fsRoot: home });
    expect(c).toEqual({ ok: false, reason: expect.stringContaining('no Kubernetes credentials') as string });
  });

  // client-go's InClusterConfig wants both; with the host alone the client aimed at
  // https://<host>:undefined, and every start spent the acquire's 10 s on ERR_INVALID_URL.
  it('a mounted token with KUBERNETES_SERVICE_HOST but no KUBERNETES_SERVICE_PORT is not in-cluster: the reason names the missing variable', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'cronsafe-sa-'));
    mkdirSync(path.join(root, SERVICE_ACCOUNT_DIR), { recursive: true });
    writeFileSync(path.join(root, SERVICE_ACCOUNT_DIR, 'token'), TOKEN);
    writeFileSync(path.join(root, SERVICE_ACCOUNT_DIR, 'namespace'), 'batch');
    const c = await connectKube({ env: { HOME: root, KUBERNETES_SERVICE_HOST: '127.0.0.1' }, fsRoot: root });
    expect(c).toEqual({ ok: false, reason: expect.stringContaining('KUBERNETES_SERVICE_PORT is not set') as string });
    const d = await connectKube({ env: { HOME: root, KUBERNETES_SERVICE_PORT: '443' }, fsRoot: root });
    expect(d).toEqual({ ok: false, reason: expect.stringContaining('KUBERNETES_SERVICE_HOST is not set') as string });
  });

  // client-go reads KUBECONFIG alone when it is set, but a list naming no file that is there
  // is an empty config, and then the pod's service account is used (merged_client_builder).
  // An image's `ENV KUBECONFIG=...` for a file the pod does not mount turned the Lease, the
  // Events and the scheduled time off ("no kubeconfig"), where kubectl in the same pod worked.
  it.skipIf(spawnSync('openssl', ['version']).status !== 0)('in a pod, a KUBECONFIG naming only files that are not there is an empty config: the service account is used, as kubectl does', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'cronsafe-sa-'));
    const sa = path.join(root, SERVICE_ACCOUNT_DIR);
    mkdirSync(sa, { recursive: true });
    const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=kubernetes', '-addext', 'subjectAltName=IP:127.0.0.1',
      '-keyout', path.join(root, 'apiserver.key'), '-out', path.join(sa, 'ca.crt')], { encoding: 'utf8' });
    if (made.status !== 0) throw new Error(made.stderr);
    writeFileSync(path.join(sa, 'token'), TOKEN);
    writeFileSync(path.join(sa, 'namespace'), 'jobs-ns\n');
    // TLS in front of the fake API server, with the certificate the service account's ca.crt trusts.
    const tls = tlsServer({ key: readFileSync(path.join(root, 'apiserver.key')), cert: readFileSync(path.join(sa, 'ca.crt')) }, (client) => {
      const upstream = netConnect(fake.port, '127.0.0.1');
      client.pipe(upstream).pipe(client);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
    });
    await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
    // The kubelet's env: client-node's in-cluster loader reads it from the process.
    const service = { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String((tls.address() as { port: number }).port) };
    const saved = { host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT };
    Object.assign(process.env, service);
    try {
      const missing = `${path.join(root, 'nope', 'config')}${path.delimiter}${path.join(root, 'empty')}`;
      writeFileSync(path.join(root, 'empty'), '');
      const c = await connectKube({ env: { HOME: root, KUBECONFIG: missing, ...service }, fsRoot: root });
      if (!c.ok) throw new Error(c.reason);
      expect(c.kube.source).toContain('in-cluster service account');
      expect(c.kube.namespace).toBe('jobs-ns');
      const err = await c.kube.coordination.readNamespacedLease({ name: 'x', namespace: c.kube.namespace }, c.kube.options()).catch((e: unknown) => e);
      expect(apiFailure(err)).toMatchObject({ kind: 'not-found', status: 404 }); // through, with the token
      // A KUBECONFIG that names a kubeconfig is still the only one read, in a pod too.
      const d = await connectKube({ env: { HOME: root, KUBECONFIG: fake.kubeconfig, ...service }, fsRoot: root });
      expect(d.ok && d.kube.source).toBe(`KUBECONFIG=${fake.kubeconfig}`);
    } finally {
      for (const [k, v] of [['KUBERNETES_SERVICE_HOST', saved.host], ['KUBERNETES_SERVICE_PORT', saved.port]] as const) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
      await new Promise<void>((resolve) => tls.close(() => resolve()));
    }
  });

  it('from KUBECONFIG: the pod namespace wins over the context namespace, which wins over default', async () => {
    const a = await connectKube({ env: { KUBECONFIG: fake.kubeconfig, CRONSAFE_POD_NAMESPACE: 'pod-ns' }, fsRoot: '/nonexistent' });
    const b = await connectKube({ env: { KUBECONFIG: fake.kubeconfig }, fsRoot: '/nonexistent' });
    expect(a.ok && a.kube.namespace).toBe('pod-ns');
    expect(b.ok && b.kube.namespace).toBe('jobs-ns');
  });

  // kubectl reads KUBECONFIG as a list: missing files skipped, the first to name a thing
  // wins, the first current-context set. Only the first file was read (ENOENT, or "no
  // current cluster"), and the Lease was off where kubectl worked.
  it('KUBECONFIG as a list, as kubectl reads it: a missing or empty file skipped, the current-context of one file, the cluster and user of another', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-kc-'));
    const first = path.join(dir, 'config');
    writeFileSync(first, 'apiVersion: v1\nkind: Config\ncurrent-context: fake\npreferences: {}\n');
    fake.seed('pods', { metadata: { name: 'pod-1', namespace: 'jobs-ns' } });
    const empty = path.join(dir, 'empty');
    writeFileSync(empty, '');
    const c = await connectKube({ env: { KUBECONFIG: [path.join(dir, 'missing'), empty, first, fake.kubeconfig].join(path.delimiter) }, fsRoot: '/nonexistent' });
    if (!c.ok) throw new Error(c.reason);
    const pod = await c.kube.core.readNamespacedPod({ name: 'pod-1', namespace: 'jobs-ns' }, c.kube.options());
    expect(pod.metadata?.name).toBe('pod-1');
    const none = await connectKube({ env: { KUBECONFIG: [path.join(dir, 'missing'), path.join(dir, 'gone')].join(path.delimiter) }, fsRoot: '/nonexistent' });
    expect(none).toEqual({ ok: false, reason: expect.stringContaining('missing or empty') as string });
  });

  it('a broken kubeconfig is a reason, not a throw', async () => {
    const bad = path.join(mkdtempSync(path.join(tmpdir(), 'cronsafe-kc-')), 'config');
    writeFileSync(bad, 'apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n');
    const c = await connectKube({ env: { KUBECONFIG: bad } });
    expect(c.ok).toBe(false);
  });

  // Node's own errors from getting the credentials, before any connection, are not a network
  // fault: "cannot reach the API server (ENOENT)" sent people to the network, and the Lease's
  // acquire tried again for 10 s at every start.
  it('a kubeconfig credential plugin that cannot be started is a credentials failure, not an unreachable API server', async () => {
    const kc = path.join(mkdtempSync(path.join(tmpdir(), 'cronsafe-kc-')), 'config');
    writeFileSync(kc, readFileSync(fake.kubeconfig, 'utf8').replace(/user: \{token: .*\}/,
      'user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: /nonexistent/aws-auth-plugin, args: [token]}}'));
    const c = await connectKube({ env: { KUBECONFIG: kc }, fsRoot: '/nonexistent' });
    if (!c.ok) throw new Error(c.reason);
    const err = await c.kube.coordination.readNamespacedLease({ name: 'x', namespace: 'jobs-ns' }, c.kube.options()).catch((e: unknown) => e);
    expect(apiFailure(err)).toEqual({ kind: 'unauthorized', message: "cannot run the kubeconfig's credential plugin: spawn /nonexistent/aws-auth-plugin ENOENT" });
    expect(fake.requests).toEqual([]);
  });

  it('a kubeconfig credential plugin that hangs is cut at the request timeout: a credentials failure', async () => {
    const kc = path.join(mkdtempSync(path.join(tmpdir(), 'cronsafe-kc-')), 'config');
    writeFileSync(kc, readFileSync(fake.kubeconfig, 'utf8').replace(/user: \{token: .*\}/,
      'user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: sleep, args: ["2"]}}'));
    const c = await connectKube({ env: { KUBECONFIG: kc }, fsRoot: '/nonexistent', timeoutMs: 300 });
    if (!c.ok) throw new Error(c.reason);
    const t0 = Date.now();
    const err = await c.kube.coordination.readNamespacedLease({ name: 'x', namespace: 'jobs-ns' }, c.kube.options()).catch((e: unknown) => e);
    expect(Date.now() - t0).toBeLessThan(1500);
    expect(apiFailure(err)).toEqual({ kind: 'unauthorized', message: 'the Kubernetes credentials did not come within 0.3 s (a kubeconfig exec plugin that hangs?)' });
    expect(fake.requests).toEqual([]);
  });

  it('a hung API server: the request is aborted at the timeout and classified', async () => {
    const c = await connectKube({ env: { KUBECONFIG: fake.kubeconfig }, timeoutMs: 300 });
    if (!c.ok) throw new Error(c.reason);
    fake.hang = true;
    const t0 = Date.now();
    const err = await c.kube.coordination.readNamespacedLease({ name: 'x', namespace: 'jobs-ns' }, c.kube.options()).catch((e: unknown) => e);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(apiFailure(err)).toMatchObject({ kind: 'timeout' });
  });

  // Node 20's AbortSignal.any holds its sources weakly, and nothing else held the timeout's
  // signal: a garbage collection during the call (V8 runs one on its own in an idle
  // process) took it, and a call given the run's stop as well was never cut. The Lease's
  // acquire then waited on a hung API server until the SIGTERM.
  it('a hung API server: a request given a stop signal too is still aborted at the timeout, after a garbage collection', async () => {
    const c = await connectKube({ env: { KUBECONFIG: fake.kubeconfig }, timeoutMs: 300 });
    if (!c.ok) throw new Error(c.reason);
    fake.hang = true;
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const stop = new AbortController();
    const t0 = Date.now();
    const call = c.kube.coordination.readNamespacedLease({ name: 'x', namespace: 'jobs-ns' }, c.kube.options(undefined, stop.signal)).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 100));
    gc();
    const err = await Promise.race([call, new Promise((r) => setTimeout(() => r('still waiting after 3 s'), 3000))]);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(apiFailure(err)).toMatchObject({ kind: 'timeout' });
  });

  it('a timeout with a fraction of a millisecond (a quarter of drain.marginSeconds 2.25: 562.5 ms) is a timeout, not a refused call', async () => {
    // AbortSignal.timeout throws on a fraction: every call so bounded (Events, the Lease
    // release) failed at once, "cannot reach the API server (ERR_OUT_OF_RANGE)".
    const timeoutMs = requestTimeoutMs({ drain: { gracePeriodSeconds: 30, marginSeconds: 2.25 } });
    expect(timeoutMs).toBe(562.5);
    const c = await connectKube({ env: { KUBECONFIG: fake.kubeconfig }, timeoutMs });
    if (!c.ok) throw new Error(c.reason);
    const err = await c.kube.batch.readNamespacedJob({ name: 'nope', namespace: 'jobs-ns' }, c.kube.options()).catch((e: unknown) => e);
    expect(apiFailure(err)).toMatchObject({ kind: 'not-found', status: 404 });
    const made = await c.kube.coordination.createNamespacedLease({ namespace: 'jobs-ns', body: { metadata: { name: 'x' }, spec: {} } }, c.kube.options(10_000 / 3));
    expect(made.metadata?.name).toBe('x');
  });

  it('Status bodies become one-line messages', async () => {
    const c = await connectKube({ env: { KUBECONFIG: fake.kubeconfig } });
    if (!c.ok) throw new Error(c.reason);
    const err = await c.kube.batch.readNamespacedJob({ name: 'nope', namespace: 'jobs-ns' }, c.kube.options()).catch((e: unknown) => e);
    expect(apiFailure(err)).toEqual({ kind: 'not-found', status: 404, message: 'HTTP 404: jobs.batch "nope" not found' });
  });

  // client-go's `tokenFile` (in-cluster kubeconfigs, projected tokens for sidecars): kubectl
  // used it, client-node ignores it, and every call was 401 (the feature off).
  it('a kubeconfig user with a tokenFile (relative to the kubeconfig, as client-go takes it) is authenticated with its contents', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-kc-'));
    mkdirSync(path.join(dir, 'sa'));
    writeFileSync(path.join(dir, 'sa', 'token'), `${TOKEN}\n`);
    const kc = path.join(dir, 'config');
    writeFileSync(kc, readFileSync(fake.kubeconfig, 'utf8').replace(/user: \{token: .*\}/, 'user: {tokenFile: sa/token}'));
    const c = await connectKube({ env: { KUBECONFIG: kc } });
    if (!c.ok) throw new Error(c.reason);
    const err = await c.kube.coordination.readNamespacedLease({ name: 'x', namespace: 'jobs-ns' }, c.kube.options()).catch((e: unknown) => e);
    expect(apiFailure(err)).toMatchObject({ kind: 'not-found', status: 404 });
    expect(fake.requests.map((r) => r.status)).toEqual([404]);
  });

  // The client drops the body of a 401 (its API description lists that answer): the reason
  // was its own message's first line, `HTTP 401: HTTP-Code: 401`.
  it('a 401 (a token the API server refuses) says the credentials were refused, not "HTTP-Code: 401"', async () => {
    const kc = path.join(mkdtempSync(path.join(tmpdir(), 'cronsafe-kc-')), 'config');
    writeFileSync(kc, readFileSync(fake.kubeconfig, 'utf8').replace(/user: \{token: .*\}/, 'user: {token: expired-token}'));
    const c = await connectKube({ env: { KUBECONFIG: kc } });
    if (!c.ok) throw new Error(c.reason);
    for (const call of [
      () => c.kube.coordination.readNamespacedLease({ name: 'x', namespace: 'jobs-ns' }, c.kube.options()),
      () => c.kube.coordination.createNamespacedLease({ namespace: 'jobs-ns', body: { metadata: { name: 'x' } } }, c.kube.options()),
      () => c.kube.batch.readNamespacedJob({ name: 'x', namespace: 'jobs-ns' }, c.kube.options()),
    ]) {
      const err = await call().catch((e: unknown) => e);
      expect(apiFailure(err)).toEqual({ kind: 'unauthorized', status: 401, message: 'HTTP 401: Unauthorized: the API server refused the credentials (a token expired, revoked or for another cluster?)' });
    }
  });
});

it('the request timeout fits in the drain margin', () => {
  expect(requestTimeoutMs({ drain: { gracePeriodSeconds: 30, marginSeconds: 5 } })).toBe(1250);
  expect(requestTimeoutMs({ drain: { gracePeriodSeconds: 300, marginSeconds: 60 } })).toBe(5000);
  expect(requestTimeoutMs({ drain: { gracePeriodSeconds: 3, marginSeconds: 0 } })).toBe(500);
});

it('@kubernetes/client-node is loaded lazily: no static import of it anywhere in the build', () => {
  const dist = path.join(ROOT, 'dist');
  const files: string[] = [];
  const walk = (d: string) => {
    for (const f of readdirSync(d)) {
      const p = path.join(d, f);
      if (statSync(p).isDirectory()) walk(p);
      else if (p.endsWith('.js')) files.push(p);
    }
  };
  walk(dist);
  const importers = files.filter((f) => /from\s+['"]@kubernetes\/client-node['"]|import\s+['"]@kubernetes\/client-node['"]/.test(readFileSync(f, 'utf8')));
  expect(importers).toEqual([]);
  const dynamic = files.filter((f) => readFileSync(f, 'utf8').includes("import('@kubernetes/client-node')"));
  expect(dynamic.map((f) => path.relative(dist, f))).toEqual(['kube/client.js']);
});
