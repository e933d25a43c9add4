/**
 * `cronsafe run` processes against the fake API server (KUBECONFIG in their env), as two
 * pods on different nodes would be: different local lock files, one Lease between them.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it as base } from 'vitest';
import YAML from 'yaml';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { CLI, FIXTURES, finished, runCli, spawnCli, spawnCliRaw, statusJson, workspace, type SpawnOptions, type Workspace } from '../helpers/cli.js';
import { FakeApiServer, startFakeApiServer, TOKEN, type Obj } from '../helpers/fake-apiserver.js';
import { chownTree, NOBODY } from '../helpers/users.js';
import { filesIn, until } from '../helpers/wait.js';

const SLOW = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];

/**
 * Each test has an API server of its own (with the Job seeded), so that the tests, which
 * mostly wait on answers held back, renewals and handlers, run side by side: the file takes
 * about as long as its slowest tests, not the sum of them all.
 */
const it = base.extend<{ fake: FakeApiServer }>({
  // eslint-disable-next-line no-empty-pattern -- vitest reads a fixture's needs from this pattern
  fake: async ({}, use) => {
    const fake = await startFakeApiServer('batch');
    fake.seed('jobs', { metadata: { name: 'test-job-29000000', ownerReferences: [{ apiVersion: 'batch/v1', kind: 'CronJob', name: 'test-job', uid: 'cj-1', controller: true }] } });
    await use(fake);
    await fake.close();
  },
});

/** The env a pod of the chart gets (downward API), pointed at the fake server. */
const podEnv = (fake: FakeApiServer, pod: string, extra: Record<string, string> = {}) => ({
  KUBECONFIG: fake.kubeconfig,
  CRONSAFE_POD_NAME: pod,
  CRONSAFE_POD_NAMESPACE: 'batch',
  CRONSAFE_JOB_NAME: 'test-job-29000000',
  ...extra,
});

/**
 * Another node's pod runs in its own mount namespace (`unshare -m`): the ledger's name lock
 * (sqlite/name-lock.ts) is per host and mount namespace, so there only the Lease stands
 * between the two runs, as between two nodes. Needs root (CI runs as root).
 */
const canUnshare = spawnSync('unshare', ['-m', 'true']).status === 0;
async function runOnOtherNode(args: string[], opts: SpawnOptions) {
  const r = spawnCliRaw('unshare', ['-m', process.execPath, CLI, ...args], opts);
  const { code, signal } = await r.exited;
  return { code, signal, lines: r.lines, stderr: r.stderr(), stdout: r.stdout() };
}

/** A second config for the same ledger and Lease, with its own lock file: another pod's view. */
function otherPod(ws: Workspace, node = 'other-node'): string {
  const cfg = YAML.parse(readFileSync(ws.configPath, 'utf8')) as Obj;
  cfg.lock.path = path.join(ws.dir, node, 'cronsafe.lock');
  // A pod on another node sees the ledger through a network file system (a ReadWriteMany
  // volume): the user allowed it, so cronsafe takes no flock on the ledger file there, and
  // only the Lease keeps the two runs apart.
  cfg.state = { ...cfg.state, allowNetworkFilesystem: true };
  const file = path.join(ws.dir, `cronsafe-${node}.yaml`);
  writeFileSync(file, YAML.stringify(cfg));
  return file;
}

const lease = (fake: FakeApiServer): Obj | undefined => fake.get('leases', 'test-job');

describe.concurrent('the Kubernetes Lease across processes', () => {
  it.skipIf(!canUnshare)('two runs with different local locks: one works, the other skips with exit 0 and a recorded lock-skip', async ({ fake, onTestFinished }) => {
    const ws = workspace(
      { handler: { command: SLOW }, concurrency: 2, events: { enabled: true } },
      { 'a.scc': 'a', 'b.scc': 'b' },
    );
    rewriteLock(ws, { kubernetesLease: { durationSeconds: 10, renewSeconds: 1 } });
    const markers = path.join(ws.dir, 'markers');
    // The first run's handlers work until the gate opens, once the second run has ended: a
    // fixed time (3 s) ran out before a loaded machine had started the second.
    const gate = path.join(ws.dir, 'gate');
    onTestFinished(() => writeFileSync(gate, '')); // a failed test leaves no run waiting on it
    const first = spawnCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { MARKER_DIR: markers, GATE: gate }), timeoutMs: 120_000 });
    await until(() => filesIn(markers).length === 2, 'the first run to start its handlers', 45_000);
    expect(lease(fake)?.spec.holderIdentity).toMatch(/^pod-a\//);

    const second = await runOnOtherNode(['run', '-c', otherPod(ws)], { env: podEnv(fake, 'pod-b', { MARKER_DIR: markers, SLOW_MS: '10' }) });
    writeFileSync(gate, '');
    expect(second.code, second.stderr).toBe(0);
    const skip = second.lines.find((l) => l.msg === 'skipped: another run holds the Kubernetes Lease');
    expect(String(skip?.reason)).toMatch(/batch\/test-job is held by pod-a\//);
    expect(finished(second)?.outcome).toBe('skipped-locked');
    // The skip is an Event on the Job and its CronJob.
    expect(fake.list('events').filter((e) => e.reason === 'CronsafeSkipped').map((e) => e.involvedObject.kind).sort()).toEqual(['CronJob', 'Job']);

    const r1 = await first.exited;
    expect(r1.code, first.stderr()).toBe(0);
    expect(filesIn(markers)).toHaveLength(2); // only the first run's handlers ever started
    expect(first.lines.some((l) => l.msg === 'Kubernetes Lease released')).toBe(true);
    expect(lease(fake)?.spec.holderIdentity).toBeUndefined();
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
    const ledger = await openSqliteLedger(ws.db);
    try {
      expect((await ledger.totals()).lockSkips).toBe(1);
    } finally {
      await ledger.close();
    }
  }, 120_000);

  it('a lost Lease stops claiming and drains: exit 75, the rest handed back, the new holder untouched', async ({ fake, onTestFinished }) => {
    const ws = workspace({ handler: { command: SLOW }, concurrency: 1 }, { 'a.scc': 'a', 'b.scc': 'b', 'c.scc': 'c' });
    // 15 s, not 5: a run starved of CPU at start-up (a load of 16) let a 5 s Lease expire
    // before its first item started. The takeover is seen at the next renewal (0.2 s) anyway.
    rewriteLock(ws, { kubernetesLease: { durationSeconds: 15, renewSeconds: 0.2 } });
    const markers = path.join(ws.dir, 'markers');
    // The first item works until the run has seen the loss (the gate opens then), not for a
    // fixed time a loaded machine may spend before the next renewal.
    const gate = path.join(ws.dir, 'gate');
    onTestFinished(() => writeFileSync(gate, '')); // a failed test leaves no run waiting on it
    const run = spawnCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { MARKER_DIR: markers, GATE: gate }), timeoutMs: 120_000 });
    await until(() => filesIn(markers).length === 1, 'the first item to start', 45_000);
    // Another run takes the Lease over (as after a long API partition): new holder, new version.
    const l = lease(fake)!;
    l.spec.holderIdentity = 'pod-z/intruder';
    l.metadata.resourceVersion = '999999';

    await run.waitFor((x) => x.msg.startsWith('Kubernetes Lease lost')).finally(() => writeFileSync(gate, ''));
    const r = await run.exited;
    expect(r.code, run.stderr()).toBe(75);
    const lost = run.lines.find((x) => x.msg.startsWith('Kubernetes Lease lost'));
    expect(String(lost?.reason)).toContain('taken over by pod-z/intruder');
    expect(run.lines.some((x) => x.msg.startsWith('drain: stopped claiming'))).toBe(true);
    expect(finished(run)?.outcome).toBe('drained');
    expect(filesIn(markers)).toHaveLength(1); // nothing claimed after the loss
    expect((await statusJson(ws.configPath)).items).toMatchObject({ done: 1, claimed: 0, pending: 2 });
    expect(lease(fake)?.spec.holderIdentity).toBe('pod-z/intruder'); // a lost Lease is not "released"
  }, 120_000);

  // The Lease's expiry is a timer, and a timer waits for the event loop: once a module
  // handler that blocked it for longer than the duration returned, the claim loop started
  // the next item before the timer ran, while another pod may have held the Lease already
  // (a module that writes no output file: nothing between its return and the next claim
  // waits for I/O, so the loop never reached its timers).
  it('a module handler that blocks the event loop past the Lease duration: nothing claimed after it, drained as on a lost Lease (exit 75)', async ({ fake }) => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'handlers/module-blocks.mjs') }, output: undefined, concurrency: 1 }, { 'a.scc': 'a', 'b.scc': 'b', 'c.scc': 'c' });
    // 6 s: its renew deadline (4 s) leaves a start-up starved of CPU (a loaded machine) room before the first claim.
    rewriteLock(ws, { kubernetesLease: { durationSeconds: 6, renewSeconds: 0.5 } });
    const markers = path.join(ws.dir, 'markers');
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { MARKER_DIR: markers, BLOCK_MS: '7000' }), timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(75);
    expect(filesIn(markers), r.lines.map((l) => `${String(l.time)} ${l.msg} ${String(l.reason ?? '')}`).join('\n')).toHaveLength(1); // only the item that blocked ever started
    const lost = r.lines.find((x) => x.msg.startsWith('Kubernetes Lease lost'));
    expect(String(lost?.reason)).toContain('not renewed within the renew deadline');
    expect(finished(r)?.outcome).toBe('drained');
    expect((await statusJson(ws.configPath)).items).toMatchObject({ done: 1, claimed: 0, pending: 2 });
  }, 60_000);

  // Renewals that fail were tried again until the Lease's expiry, and only then was it taken
  // for lost: the run claimed up to the very moment another pod could take the Lease (by that
  // pod's clock, sooner if it ran ahead), and drained beside it. As client-go's leader
  // election does (renewDeadline 10 s of a 15 s leaseDuration), it now gives up at two thirds
  // of the duration, while nobody can take the Lease yet.
  it('renewals failing (API server down): the Lease is given up at the renew deadline, well before another pod could take it, and the run drains (exit 75)', async ({ fake, onTestFinished }) => {
    const ws = workspace({ handler: { command: SLOW }, concurrency: 1 }, { 'a.scc': 'a', 'b.scc': 'b', 'c.scc': 'c' });
    rewriteLock(ws, { kubernetesLease: { durationSeconds: 15, renewSeconds: 1 } });
    const markers = path.join(ws.dir, 'markers');
    const gate = path.join(ws.dir, 'gate');
    onTestFinished(() => writeFileSync(gate, '')); // a failed test leaves no run waiting on it
    const run = spawnCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { MARKER_DIR: markers, GATE: gate }), timeoutMs: 120_000 });
    await until(() => filesIn(markers).length === 1, 'the first item to start', 45_000);
    fake.down = true; // every renewal from now on is answered 503
    const lostLine = await run.waitFor((x) => String(x.msg).startsWith('Kubernetes Lease lost'), 40_000).finally(() => writeFileSync(gate, ''));
    const r = await run.exited;
    // The last renewal that landed is the one in the Lease: the expiry any other pod judges by.
    const expiresAt = Date.parse(lease(fake)!.spec.renewTime as string) + 15_000;
    const lostAt = Date.parse(String(lostLine.time));
    expect(expiresAt - lostAt).toBeGreaterThanOrEqual(4000);
    expect(String(lostLine.reason)).toContain('not renewed within the renew deadline (10s of the 15s Lease duration)');
    expect(r.code, run.stderr()).toBe(75);
    expect(finished(run)?.outcome).toBe('drained');
    expect(filesIn(markers)).toHaveLength(1); // nothing claimed after the loss
    expect((await statusJson(ws.configPath)).items).toMatchObject({ claimed: 0, pending: 2 });
  }, 120_000);

  // A module handler that blocked the event loop for less than the duration but past the
  // renew deadline (12 s of a 15 s Lease): once it returned, the run claimed and started the
  // next items 3 s before anyone else could take the Lease, and went on with them after that.
  it('a module handler that blocks the event loop past the renew deadline (not yet the expiry): nothing claimed after it, drained (exit 75)', async ({ fake }) => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'handlers/module-blocks.mjs') }, output: undefined, concurrency: 1 }, { 'a.scc': 'a', 'b.scc': 'b', 'c.scc': 'c' });
    rewriteLock(ws, { kubernetesLease: { durationSeconds: 15, renewSeconds: 1 } });
    const markers = path.join(ws.dir, 'markers');
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { MARKER_DIR: markers, BLOCK_MS: '12000' }), timeoutMs: 90_000 });
    expect(r.code, r.stderr).toBe(75);
    expect(filesIn(markers)).toHaveLength(1); // only the item that blocked ever started
    const lost = r.lines.find((x) => String(x.msg).startsWith('Kubernetes Lease lost'));
    expect(String(lost?.reason)).toContain('not renewed within the renew deadline');
    expect(finished(r)?.outcome).toBe('drained');
    expect((await statusJson(ws.configPath)).items).toMatchObject({ done: 1, claimed: 0, pending: 2 });
  }, 90_000);

  it('an API server answering in 1.5 s (slow, not down) keeps the Lease held: acquired, renewed, never lost', async ({ fake }) => {
    // Within a real API server's latency under load (its request timeout is 60 s). The run's
    // Lease calls were cut at a quarter of drain.marginSeconds (1.25 s by default): the
    // acquire degraded to the local lock, and the renewals (each landing after its timeout,
    // so the next one was 409) lost a Lease this run still held.
    fake.latency = () => 1500;
    const ws = workspace({ handler: { command: SLOW }, concurrency: 1 }, { 'a.scc': 'a', 'b.scc': 'b', 'c.scc': 'c' });
    rewriteLock(ws, { kubernetesLease: { durationSeconds: 6, renewSeconds: 2 } });
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { SLOW_MS: '2500' }), timeoutMs: 60_000 });
    expect(r.lines.some((l) => l.msg === 'Kubernetes Lease acquired'), r.stdout).toBe(true);
    expect(r.lines.filter((l) => String(l.msg).startsWith('Kubernetes Lease lost'))).toEqual([]);
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)?.outcome).toBe('completed');
    expect(fake.requests.filter((q) => q.resource === 'leases' && q.verb === 'update' && q.status === 200).length).toBeGreaterThanOrEqual(3);
  }, 60_000);

  it('a release on an API server answering in 1.5 s hands the Lease back: the next run takes it at once, not skipped until it expires', async ({ fake }) => {
    // The release was cut at a quarter of drain.marginSeconds (1.25 s by default) even at the
    // end of a run nobody stopped: the Lease stayed held for its 90 s, and the next run
    // (a retry of the Job, a manual Job, the next fire of a frequent schedule) skipped.
    fake.latency = () => 1500;
    const ws = workspace({ handler: { command: SLOW }, concurrency: 1 }, { 'a.scc': 'a' });
    rewriteLock(ws, { kubernetesLease: {} });
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { SLOW_MS: '10' }), timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(r.lines.filter((l) => String(l.msg).includes('could not release'))).toEqual([]);
    expect(r.lines.some((l) => l.msg === 'Kubernetes Lease released')).toBe(true);
    expect(lease(fake)?.spec.holderIdentity).toBeUndefined();

    fake.latency = () => 0;
    writeFileSync(path.join(ws.source, 'b.scc'), 'b');
    const next = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-b', { SLOW_MS: '10' }) });
    expect(next.code, next.stderr).toBe(0);
    expect(finished(next)?.outcome).toBe('completed');
    expect(lease(fake)?.spec.holderIdentity).toBeUndefined();
  }, 60_000);

  it('a release whose connection is cut (the API server restarting as the run ends) is tried again: the next run takes the Lease at once, not skipped until it expires', async ({ fake }) => {
    // Only a 429 or 5xx was tried again: a refused or reset connection, what a restarting
    // API server gives without a load balancer answering 503 for it, gave the release up at
    // once, and the Lease stayed held for its duration (90 s by default): the next run (a
    // retry of the Job, a manual Job, the next fire) skipped, exit 0, its backlog left.
    let writes = 0;
    // The only update of the run is its release (no renewal within it).
    fake.cut = (verb, resource) => resource === 'leases' && verb === 'update' && ++writes === 1;
    const ws = workspace({ handler: { command: SLOW }, concurrency: 1 }, { 'a.scc': 'a' });
    rewriteLock(ws, { kubernetesLease: { durationSeconds: 3600, renewSeconds: 1800 } });
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { SLOW_MS: '10' }) });
    expect(r.code, r.stderr).toBe(0);
    expect(fake.requests.filter((q) => q.resource === 'leases' && q.verb === 'update').map((q) => q.status)).toEqual([0, 200]);
    expect(r.lines.filter((l) => String(l.msg).includes('could not release'))).toEqual([]);
    expect(r.lines.some((l) => l.msg === 'Kubernetes Lease released')).toBe(true);
    expect(lease(fake)?.spec.holderIdentity).toBeUndefined();

    fake.cut = () => false;
    writeFileSync(path.join(ws.source, 'b.scc'), 'b');
    const next = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-b', { SLOW_MS: '10' }) });
    expect(next.code, next.stderr).toBe(0);
    expect(finished(next)?.outcome).toBe('completed');
  });

  it('SIGTERM on an API server answering in 1.5 s: the drained run still hands the Lease back within the grace period', async ({ fake }) => {
    // After a stop the release may use what is left of the grace period (less half the
    // margin), not only a quarter of the margin: the item finished early, 25 s were left.
    fake.latency = () => 1500;
    const ws = workspace({ handler: { command: SLOW }, concurrency: 1 }, { 'a.scc': 'a', 'b.scc': 'b' });
    rewriteLock(ws, { kubernetesLease: {} });
    const markers = path.join(ws.dir, 'markers');
    const run = spawnCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { MARKER_DIR: markers, SLOW_MS: '1000' }), timeoutMs: 100_000 });
    // Node's start, then the acquire's read and create at 1.5 s each: past 20 s at a load of
    // 40 on 2 cores. The bound is readiness, not what the test measures (that is below).
    await until(() => filesIn(markers).length === 1, 'the item to start', 60_000);
    const signalled = Date.now();
    run.child.kill('SIGTERM');
    const r = await run.exited;
    expect(Date.now() - signalled).toBeLessThan(10_000);
    expect(run.lines.filter((l) => String(l.msg).includes('could not release'))).toEqual([]);
    expect(run.lines.some((l) => l.msg === 'Kubernetes Lease released'), run.stdout()).toBe(true);
    expect(lease(fake)?.spec.holderIdentity).toBeUndefined();
    expect(r.code, run.stderr()).toBe(75);
    expect(finished(run)?.outcome).toBe('drained');
  }, 120_000);

  it('a failed renewal is tried again soon, not a whole renewSeconds later: an API server back before the expiry keeps the Lease', async ({ fake, onTestFinished }) => {
    // Renewing every 6 s of a 10 s Lease: the one failed try at 6 s was followed by the next
    // at 12 s, after the expiry at 10 s, so an API server down for a few seconds (a control
    // plane upgrade) cost the run its Lease (exit 75) though it was back at 7 s.
    const ws = workspace({ handler: { command: SLOW }, concurrency: 1 }, { 'a.scc': 'a' });
    rewriteLock(ws, { kubernetesLease: { durationSeconds: 10, renewSeconds: 6 } });
    // The item works until the run has renewed again or lost the Lease (past the expiry at
    // 10 s when the retry comes too late), rather than a fixed 14 s.
    const gate = path.join(ws.dir, 'gate');
    onTestFinished(() => writeFileSync(gate, '')); // a failed test leaves no run waiting on it
    const run = spawnCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { GATE: gate }), timeoutMs: 60_000 });
    await run.waitFor((l) => l.msg === 'Kubernetes Lease acquired');
    // Down until a second after the first renewal it refused (the server itself brings it
    // back: a test starved of CPU was late to, and the Lease expired meanwhile).
    fake.onRequest = (verb, resource) => {
      if (resource === 'leases' && verb === 'update' && fake.down) setTimeout(() => (fake.down = false), 1000);
    };
    fake.down = true;
    await run.waitFor((l) => String(l.msg).startsWith('Kubernetes Lease: renewal failed'), 15_000);
    await run.waitFor((l) => l.msg === 'Kubernetes Lease: renewed again' || String(l.msg).startsWith('Kubernetes Lease lost'), 15_000).finally(() => writeFileSync(gate, ''));
    const r = await run.exited;
    expect(run.lines.filter((l) => String(l.msg).startsWith('Kubernetes Lease lost'))).toEqual([]);
    expect(run.lines.some((l) => l.msg === 'Kubernetes Lease: renewed again')).toBe(true);
    expect(r.code, run.stderr()).toBe(0);
    expect(finished(run)?.outcome).toBe('completed');
  }, 60_000);

  it('renewals keep to renewSeconds from the last renewTime, not from the end of the last call: 2.5 s answers keep a 10 s Lease renewed every 6 s', async ({ fake }) => {
    // Timed from the end of the call, each renewal came a latency late: the first started
    // at 8.5 s and was answered at 11 s, after the expiry at 10 s (LOST, exit 75).
    fake.latency = () => 2500;
    const ws = workspace({ handler: { command: SLOW }, concurrency: 1 }, { 'a.scc': 'a' });
    rewriteLock(ws, { kubernetesLease: { durationSeconds: 10, renewSeconds: 6 } });
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { SLOW_MS: '14000' }), timeoutMs: 60_000 });
    expect(r.lines.some((l) => l.msg === 'Kubernetes Lease acquired'), r.stdout).toBe(true);
    expect(r.lines.filter((l) => String(l.msg).startsWith('Kubernetes Lease lost'))).toEqual([]);
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)?.outcome).toBe('completed');
  }, 60_000);

  it('SIGTERM while the acquire waits on a slow API server (4.9 s answers) ends the run at once, drained, without taking the Lease', async ({ fake }) => {
    // The acquire went on after the signal: its read and its create took 9.8 s, past an
    // 8 s grace period, so the last resort ended the run (no 'run finished', no release),
    // and the create landed after the exit: a Lease held by a gone run until it expired.
    let asked = 0;
    fake.latency = () => {
      asked++;
      return 4900;
    };
    const ws = workspace({ handler: { command: SLOW }, concurrency: 1, drain: { gracePeriodSeconds: 8, marginSeconds: 2 } }, { 'a.scc': 'a' });
    rewriteLock(ws, { kubernetesLease: {} });
    const run = spawnCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { SLOW_MS: '10' }), timeoutMs: 60_000 });
    await until(() => asked > 0, 'the acquire to ask the API server');
    const signalled = Date.now();
    run.child.kill('SIGTERM');
    const r = await run.exited;
    expect(Date.now() - signalled).toBeLessThan(4000);
    expect(r.code, run.stderr()).toBe(75);
    expect(finished(run)?.outcome).toBe('drained');
    expect(asked).toBe(1); // the read only: no create after the stop
    expect(run.lines.filter((l) => String(l.msg).startsWith('Kubernetes Lease'))).toEqual([]);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ claimed: 0, done: 0 }); // the pass stopped before its scan
  }, 60_000);

  it('SIGTERM while the Job is read (scheduled time, Events) on an API server answering in 4.5 s ends the run at once', async ({ fake }) => {
    // Each read may take 5 s (an API server under load), and the stop did not cut them: the
    // scheduled time's read and the Events' one took 9 s of the grace period, before the run
    // even took its lock.
    let asked = 0;
    fake.latency = () => {
      asked++;
      return 4500;
    };
    const ws = workspace({ handler: { command: SLOW }, concurrency: 1, events: { enabled: true }, scheduledTimestamp: { enabled: true }, schedule: { cron: '*/5 * * * *', timeZone: 'UTC' } }, { 'a.scc': 'a' });
    const run = spawnCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { SLOW_MS: '10', CRONSAFE_SCHEDULED_TIME: '' }), timeoutMs: 60_000 });
    await until(() => asked > 0, 'the Job read to reach the API server');
    const signalled = Date.now();
    run.child.kill('SIGTERM');
    const r = await run.exited;
    expect(Date.now() - signalled).toBeLessThan(3000);
    expect(r.code, run.stderr()).toBe(75);
    expect(asked).toBe(1);
  }, 60_000);

  it('an API server that accepts requests and never answers: the acquire gives up after its tries, and the run goes on with the local lock', async ({ fake }) => {
    // Each read was cut at 5 s only until the first garbage collection: AbortSignal.any (the
    // timeout and the run's stop) holds the timeout's signal weakly in Node 20, so the
    // second read waited for good and the run hung, holding the local lock, until SIGTERM.
    fake.hang = true;
    const ws = workspace({ handler: { command: SLOW }, concurrency: 1 }, { 'a.scc': 'a' });
    rewriteLock(ws, { kubernetesLease: {} });
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { SLOW_MS: '10' }), timeoutMs: 90_000 });
    expect(r.code, r.stderr).toBe(0);
    // Timed by the run's own log, not by the wall clock around it: with 4 test workers at a
    // load of 30 the start of Node alone made a run of ~13 s take 32 s. After the first read
    // cut at 5 s, the second is cut too (5 s, plus the 2 s pause): a read that waited for
    // good never came to `unavailable`.
    const at = (msg: string) => {
      const line = r.lines.find((l) => String(l.msg).startsWith(msg));
      expect(line, `a line "${msg}"`).toBeDefined();
      return { line: line!, ms: Date.parse(String(line!.time)) };
    };
    const again = at('Kubernetes Lease: the API server cannot answer now; trying again');
    const unavailable = at('Kubernetes Lease unavailable');
    expect(unavailable.ms - again.ms).toBeLessThan(20_000);
    expect(String(unavailable.line.reason)).toContain('did not answer in time');
    expect(finished(r)?.outcome).toBe('completed');
  }, 120_000);

  it('a 503 when the run reads the Lease (an API server restarting) does not let it start beside the holder: tried again, held, skipped', async ({ fake }) => {
    // Taken at once for "the API cannot be used", one 503 sent the run on with the local lock
    // alone while a run on another node held the Lease: both worked at once.
    const renewTime = new Date().toISOString().replace('Z', '000Z');
    fake.seed('leases', { metadata: { name: 'test-job' }, spec: { holderIdentity: 'pod-z/other-node', renewTime, acquireTime: renewTime, leaseDurationSeconds: 3600 } });
    fake.down = true;
    fake.onRequest = (_verb, resource) => {
      if (resource === 'leases' && fake.down) setTimeout(() => (fake.down = false), 1000); // back a second later
    };
    const ws = workspace({ handler: { command: SLOW }, concurrency: 1 }, { 'a.scc': 'a' });
    rewriteLock(ws, { kubernetesLease: {} });
    const markers = path.join(ws.dir, 'markers');
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { MARKER_DIR: markers, SLOW_MS: '10' }) });
    expect(r.code, r.stderr).toBe(0);
    expect(fake.requests.some((q) => q.resource === 'leases' && q.status === 503)).toBe(true);
    expect(r.lines.filter((l) => String(l.msg).startsWith('Kubernetes Lease unavailable'))).toEqual([]);
    expect(String(r.lines.find((l) => l.msg === 'skipped: another run holds the Kubernetes Lease')?.reason)).toContain('held by pod-z/other-node');
    expect(finished(r)?.outcome).toBe('skipped-locked');
    expect(filesIn(markers)).toEqual([]); // no handler ran beside the holder's run
    expect(lease(fake)?.spec.holderIdentity).toBe('pod-z/other-node');
  });

  // The pod of this Job that ran before was OOM-killed (or lost with its node) holding the
  // Lease. The Job replaces a pod only once it has failed (podFailurePolicy allows no other
  // podReplacementPolicy), so that holder is dead; the replacement skipped (exit 0), the Job
  // counted as succeeded, and the backlog waited for the next fire (a day, for a daily job).
  it('a Lease held by an earlier pod of this same Job (killed: its replacement starts within the Lease) is waited for until it expires, then taken: the retry runs, not skipped', async ({ fake }) => {
    const renewTime = new Date().toISOString().replace('Z', '000Z');
    fake.seed('leases', { metadata: { name: 'test-job' }, spec: { holderIdentity: 'test-job-29000000-bcdfg/mxa5n8jd-1c9ea57d', renewTime, acquireTime: renewTime, leaseDurationSeconds: 3 } });
    // Its last renewal just before this pod's first read, however long the start took.
    let read = false;
    fake.onRequest = (verb, resource) => {
      if (resource !== 'leases' || verb !== 'get' || read) return;
      read = true;
      fake.get('leases', 'test-job')!.spec.renewTime = new Date().toISOString().replace('Z', '000Z');
    };
    const ws = workspace({ handler: { command: SLOW }, concurrency: 1 }, { 'a.scc': 'a' });
    rewriteLock(ws, { kubernetesLease: { durationSeconds: 3, renewSeconds: 1 } });
    const markers = path.join(ws.dir, 'markers');
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'test-job-29000000-hjklm', { MARKER_DIR: markers, SLOW_MS: '10' }) });
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)?.outcome).toBe('completed');
    expect(r.lines.some((l) => String(l.msg).startsWith('Kubernetes Lease: held by an earlier pod of this Job'))).toBe(true);
    expect(filesIn(markers)).toHaveLength(1);
    expect(fake.requests.filter((q) => q.resource === 'leases' && q.verb === 'update' && q.status === 200).length).toBeGreaterThan(0);
  });

  it('a Lease held by a pod of another Job (a manual Job, a later fire) still skips at once: it may be alive', async ({ fake }) => {
    const renewTime = new Date().toISOString().replace('Z', '000Z');
    fake.seed('leases', { metadata: { name: 'test-job' }, spec: { holderIdentity: 'test-job-manual-1-bcdfg/mxa5n8jd-1c9ea57d', renewTime, acquireTime: renewTime, leaseDurationSeconds: 3600 } });
    const ws = workspace({ handler: { command: SLOW }, concurrency: 1 }, { 'a.scc': 'a' });
    rewriteLock(ws, { kubernetesLease: { durationSeconds: 3, renewSeconds: 1 } });
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'test-job-29000000-hjklm', { SLOW_MS: '10' }) });
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)?.outcome).toBe('skipped-locked');
    expect(r.lines.some((l) => String(l.msg).startsWith('Kubernetes Lease: held by an earlier pod of this Job'))).toBe(false);
  });

  it('an acquire that went on without the Lease after its create got no answer in time releases at the end the Lease that create took: the next run is not skipped as held by a run that ended', async ({ fake }) => {
    // An API server answering after the 5 s timeout (under load) executes the create all the
    // same; the read tried after it timed out too, and the acquire went on with the local
    // lock alone, as documented. The Lease named the run, which neither renewed nor released
    // it: every run within its duration (90 s by default) skipped, exit 0, held by a run
    // that had ended (and counted an overrun).
    fake.dropAbandoned = false; // a write already under way lands though its client gave up
    let slow = false;
    fake.latency = () => (slow ? 5200 : 0);
    fake.onRequest = (verb, resource) => {
      if (resource === 'leases' && verb === 'get') slow = true; // the create after the first read, and the read after it, answer late
    };
    const ws = workspace({ handler: { command: SLOW }, concurrency: 1 }, { 'a.scc': 'a' });
    rewriteLock(ws, { kubernetesLease: {} });
    const run = spawnCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { SLOW_MS: '10' }), timeoutMs: 100_000 });
    // The acquire's tries at 5.2 s each, after Node's start: past 30 s at a load of 40.
    await run.waitFor((l) => String(l.msg).startsWith('Kubernetes Lease unavailable'), 80_000);
    slow = false;
    fake.onRequest = () => undefined;
    const r = await run.exited;
    expect(r.code, run.stderr()).toBe(0);
    expect(finished(run)?.outcome).toBe('completed');
    expect(fake.requests.some((q) => q.resource === 'leases' && q.verb === 'create' && q.status === 201)).toBe(true); // the create landed
    expect(lease(fake)?.spec.holderIdentity).toBeUndefined();

    writeFileSync(path.join(ws.source, 'b.scc'), 'b');
    const next = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-b', { SLOW_MS: '10' }) });
    expect(next.code, next.stderr).toBe(0);
    expect(finished(next)?.outcome).toBe('completed');
  }, 120_000);

  it('without RBAC for Leases the run degrades to the local lock, with one warning', async ({ fake }) => {
    fake.deny('get', 'leases');
    const ws = workspace({ handler: { command: SLOW } }, { 'a.scc': 'a' });
    rewriteLock(ws, { kubernetesLease: {} });
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { SLOW_MS: '10' }) });
    expect(r.code, r.stderr).toBe(0);
    const warnings = r.lines.filter((l) => String(l.msg).startsWith('Kubernetes Lease unavailable'));
    expect(warnings).toHaveLength(1);
    expect(String(warnings[0]!.reason)).toContain('HTTP 403');
    expect(finished(r)?.outcome).toBe('completed');
  });

  // The pod's user may not read its service account token (a 0600 file of root's, as a
  // projected token is without a matching fsGroup/runAsUser): client-node reads it for each
  // request, and Node's EACCES read as a network error: "cannot reach the API server
  // (EACCES)", and every start waited 10 s for an API server that was never the problem.
  // A kubeconfig user with a tokenFile takes the same path as the in-cluster one.
  it.skipIf(process.getuid?.() !== 0)('a service account token this user may not read: one warning naming the file, at once, not "cannot reach the API server" after 10 s of tries', async ({ fake }) => {
    const ws = workspace({ handler: { command: SLOW } }, { 'a.scc': 'a' });
    rewriteLock(ws, { kubernetesLease: {} });
    const token = path.join(ws.dir, 'token');
    const kubeconfig = path.join(ws.dir, 'kubeconfig');
    writeFileSync(kubeconfig, readFileSync(fake.kubeconfig, 'utf8').replace(/user: \{token: .*\}/, `user: {auth-provider: {name: tokenFile, config: {tokenFile: ${token}}}}`));
    chownTree(ws.dir, NOBODY);
    writeFileSync(token, TOKEN, { mode: 0o600 }); // root's
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { SLOW_MS: '10', KUBECONFIG: kubeconfig }), uid: NOBODY, gid: NOBODY });
    expect(r.code, r.stderr).toBe(0);
    expect(r.lines.filter((l) => String(l.msg).startsWith('Kubernetes Lease: the API server cannot answer now'))).toEqual([]);
    const warnings = r.lines.filter((l) => String(l.msg).startsWith('Kubernetes Lease unavailable'));
    expect(warnings).toHaveLength(1);
    expect(String(warnings[0]!.reason)).toContain(`cannot read the Kubernetes credentials: EACCES: permission denied, open '${token}'`);
    expect(fake.requests).toEqual([]); // it never got as far as the network
    expect(finished(r)?.outcome).toBe('completed');
  });

  // A kubeconfig's exec plugin (aws, gke-gcloud-auth-plugin: off-Kubernetes, the daemon's
  // case) waiting for a login or a network: its credentials come before the request, outside
  // the request's timeout and the run's stop, so the acquire hung with it, and a SIGTERM
  // ended the run only at the drain's last resort (blaming the ledger).
  it('a SIGTERM while a kubeconfig credential plugin hangs ends the run at once, drained', async ({ fake }) => {
    const ws = workspace({ handler: { command: SLOW } }, { 'a.scc': 'a' });
    rewriteLock(ws, { kubernetesLease: {} });
    const started = path.join(ws.dir, 'plugin-started');
    const kubeconfig = path.join(ws.dir, 'kubeconfig');
    writeFileSync(kubeconfig, readFileSync(fake.kubeconfig, 'utf8').replace(/user: \{token: .*\}/,
      `user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: sh, args: ["-c", "touch ${started}; exec sleep 4"]}}`));
    const run = spawnCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { SLOW_MS: '10', KUBECONFIG: kubeconfig }) });
    await until(() => existsSync(started), 'the credential plugin to start');
    const t0 = Date.now();
    run.child.kill('SIGTERM');
    const r = await run.exited;
    expect(r.code, run.stderr()).toBe(75);
    expect(Date.now() - t0).toBeLessThan(2500);
    expect(finished(run)?.outcome).toBe('drained');
    expect(fake.requests).toEqual([]);
  });

  // js-yaml's message goes on with the lines around the fault, which were logged: a broken
  // kubeconfig put its bearer token into `kubectl logs`. And the first line of its message
  // names what it could not read: an alias's name or a tag, which in a kubeconfig is a value
  // written unquoted, a password starting with `*` or `!`.
  it.for([
    ['bad indentation', 'token: s3cr3t-bearer-token\n   bad: [unclosed', 'bad indentation of a mapping entry (7:4)'],
    ['an alias made of a secret', 'token: *s3cr3t-bearer-token', 'not valid YAML (6:13)'],
    ['a tag made of a secret', 'password: !s3cr3t-password', 'not valid YAML (6:15)'],
  ])('a kubeconfig that is not valid YAML (%s): one warning naming the file and the place, not the secret', async ([_what, line, fault], { fake }) => {
    const kubeconfig = path.join(mkdtempSync(path.join(tmpdir(), 'cronsafe-kc-')), 'config');
    writeFileSync(kubeconfig, `apiVersion: v1\nkind: Config\nusers:\n- name: fake\n  user:\n    ${line}\n`);
    const ws = workspace({ handler: { command: SLOW } }, { 'a.scc': 'a' });
    rewriteLock(ws, { kubernetesLease: {} });
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { SLOW_MS: '10', KUBECONFIG: kubeconfig }) });
    expect(r.code, r.stderr).toBe(0);
    const warnings = r.lines.filter((l) => String(l.msg).startsWith('Kubernetes Lease unavailable'));
    expect(warnings).toHaveLength(1);
    expect(String(warnings[0]!.reason)).toBe(`cannot load Kubernetes credentials from KUBECONFIG=${kubeconfig}: ${fault}`);
    expect(r.stdout + r.stderr).not.toContain('s3cr3t');
    expect(finished(r)?.outcome).toBe('completed');
  });

  it('dead letters become Events naming the item (the id never becomes a metric label)', async ({ fake }) => {
    const fail = [process.execPath, path.join(FIXTURES, 'process/fail-exec.mjs'), '{id}'];
    const ws = workspace({ handler: { command: fail }, retry: { maxAttempts: 1, backoffSeconds: 0, backoffMaxSeconds: 0 }, events: { enabled: true } }, { 'bad-1.scc': 'x', 'bad-2.scc': 'y' });
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a') });
    expect(r.code, r.stderr).toBe(0);
    const dead = fake.list('events').filter((e) => e.reason === 'CronsafeDeadLetter' && e.involvedObject.kind === 'Job');
    expect(dead.map((e) => /^Item "([^"]+)" was dead-lettered: /.exec(e.message as string)?.[1]).sort()).toEqual(['bad-1.scc', 'bad-2.scc']);
    for (const e of dead) expect(e.message).toContain('corrupt input');
  });

  it('an item that kills the process every time becomes an Event when the run that reclaims its last attempt dead-letters it', async ({ fake }) => {
    // Dead-lettered by crash recovery, not by a pass: before, no Event and no log line named it.
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/crash-on-poison-module.mjs') }, events: { enabled: true } }, { 'poison.scc': 'x' });
    const env = podEnv(fake, 'pod-a', { INVOCATIONS: path.join(ws.dir, 'invocations.log') });
    let last: Awaited<ReturnType<typeof runCli>> | undefined;
    for (let runs = 0; runs < 10; runs++) {
      last = await runCli(['run', '-c', ws.configPath], { env, timeoutMs: 60_000 });
      if (last.signal === null) break;
      expect(last.signal, last.stderr).toBe('SIGKILL');
    }
    expect(last?.code, last?.stderr).toBe(0);
    const dead = fake.list('events').filter((e) => e.reason === 'CronsafeDeadLetter' && e.involvedObject.kind === 'Job');
    expect(dead.map((e) => e.message)).toEqual([expect.stringMatching(/^Item "poison.scc" was dead-lettered: attempt 5 abandoned/)]);
  }, 120_000);

  it('an API server answering 503 for a moment (a control plane upgrade) does not turn Events off: the dead letters still become Events', async ({ fake }) => {
    // The first 503 turned Events off for the rest of the run: no dead letter reached
    // `kubectl describe`, however long the run went on.
    let refused = 0;
    fake.onRequest = (verb, resource) => {
      fake.down = resource === 'events' && verb === 'create' && refused++ < 4;
    };
    const fail = [process.execPath, path.join(FIXTURES, 'process/fail-exec.mjs'), '{id}'];
    const ws = workspace({ handler: { command: fail }, concurrency: 1, retry: { maxAttempts: 1, backoffSeconds: 0, backoffMaxSeconds: 0 }, events: { enabled: true } }, { 'bad-1.scc': 'x', 'bad-2.scc': 'y', 'bad-3.scc': 'z' });
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a') });
    expect(r.code, r.stderr).toBe(0);
    expect(fake.requests.filter((q) => q.resource === 'events' && q.status === 503)).toHaveLength(4);
    expect(r.lines.filter((l) => String(l.msg).startsWith('Kubernetes Events disabled'))).toEqual([]);
    const dead = fake.list('events').filter((e) => e.reason === 'CronsafeDeadLetter' && e.involvedObject.kind === 'Job');
    // Those that met the 503s were tried again a second later, the run waiting for them at its end.
    expect(dead.map((e) => /^Item "([^"]+)"/.exec(e.message as string)?.[1]).sort()).toEqual(['bad-1.scc', 'bad-2.scc', 'bad-3.scc']);
  });

  it('Events on an API server answering in 1.5 s (under load): posted on the Job and its CronJob', async ({ fake }) => {
    // Every call of the Events was cut at a quarter of drain.marginSeconds (1.25 s), the Job
    // read at the start as well: the CronJob was unknown and no Event ever arrived.
    fake.latency = () => 1500;
    const fail = [process.execPath, path.join(FIXTURES, 'process/fail-exec.mjs'), '{id}'];
    const ws = workspace({ handler: { command: fail }, retry: { maxAttempts: 1, backoffSeconds: 0, backoffMaxSeconds: 0 }, events: { enabled: true } }, { 'bad-1.scc': 'x' });
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a'), timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(r.lines.filter((l) => String(l.msg).startsWith('Kubernetes Events')), r.stdout).toEqual([]);
    expect(fake.list('events').filter((e) => e.reason === 'CronsafeDeadLetter').map((e) => e.involvedObject.kind).sort()).toEqual(['CronJob', 'Job']);
  }, 60_000);

  it('drain.marginSeconds in quarters of a second (2.25): Events are posted and the Lease is released', async ({ fake }) => {
    // A quarter of that margin is 562.5 ms, and the client refused a timeout with a fraction:
    // every Event and the release failed at once (ERR_OUT_OF_RANGE), the Lease held until it expired.
    const fail = [process.execPath, path.join(FIXTURES, 'process/fail-exec.mjs'), '{id}'];
    const ws = workspace(
      { handler: { command: fail }, retry: { maxAttempts: 1, backoffSeconds: 0, backoffMaxSeconds: 0 }, events: { enabled: true }, drain: { gracePeriodSeconds: 30, marginSeconds: 2.25 } },
      { 'bad-1.scc': 'x' },
    );
    rewriteLock(ws, { kubernetesLease: {} });
    const r = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a') });
    expect(r.code, r.stderr).toBe(0);
    expect(r.lines.filter((l) => String(l.msg).startsWith('Kubernetes Events')), r.stdout).toEqual([]);
    expect(fake.list('events').filter((e) => e.reason === 'CronsafeDeadLetter').map((e) => e.involvedObject.kind).sort()).toEqual(['CronJob', 'Job']);
    expect(r.lines.some((l) => l.msg === 'Kubernetes Lease released'), r.stdout).toBe(true);
    expect(lease(fake)?.spec.holderIdentity).toBeUndefined();
  });

  it('the scheduled time comes from the Job annotation when none is given', async ({ fake }) => {
    const occurrence = new Date(Math.floor(Date.now() / 300_000) * 300_000);
    fake.store.get('jobs')!.clear();
    fake.seed('jobs', { metadata: { name: 'test-job-29000000', annotations: { 'batch.kubernetes.io/cronjob-scheduled-timestamp': occurrence.toISOString().replace('.000Z', 'Z') } } });
    const ws = workspace({ handler: { command: SLOW }, schedule: { cron: '*/5 * * * *', timeZone: 'UTC' }, scheduledTimestamp: { enabled: true } }, { 'a.scc': 'a' });
    const env = podEnv(fake, 'pod-a', { SLOW_MS: '10' });
    const r = await runCli(['run', '-c', ws.configPath], { env: { ...env, CRONSAFE_SCHEDULED_TIME: '' } });
    expect(r.code, r.stderr).toBe(0);
    const started = r.lines.find((l) => l.msg === 'run started') as { fire?: { occurrence: string; source: string } } | undefined;
    expect(started?.fire).toMatchObject({ occurrence: occurrence.toISOString(), source: 'scheduled-time' });
  });
});

describe.concurrent('Events for a start kept out by the local lock', () => {
  it('CronsafeSkipped names the lock that is held (kubernetes-api.md: "which lock")', async ({ fake, onTestFinished }) => {
    const ws = workspace({ handler: { command: SLOW }, concurrency: 1, events: { enabled: true } }, { 'a.scc': 'a' });
    const markers = path.join(ws.dir, 'markers');
    // The first run's handler works until the second run has ended (the gate), not for 3 s,
    // which a loaded machine spent before the second had reached the lock.
    const gate = path.join(ws.dir, 'gate');
    onTestFinished(() => writeFileSync(gate, '')); // a failed test leaves no run waiting on it
    const first = spawnCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-a', { MARKER_DIR: markers, GATE: gate }), timeoutMs: 120_000 });
    await until(() => filesIn(markers).length === 1, 'the first run to start its handler', 45_000);
    const second = await runCli(['run', '-c', ws.configPath], { env: podEnv(fake, 'pod-b') });
    writeFileSync(gate, '');
    expect(second.code, second.stderr).toBe(0);
    const skipped = fake.list('events').filter((e) => e.reason === 'CronsafeSkipped');
    expect(skipped.length).toBeGreaterThan(0);
    for (const e of skipped) expect(String(e.message)).toContain(path.join(ws.state, 'cronsafe.lock'));
    expect((await first.exited).code, first.stderr()).toBe(0);
  }, 120_000);

  const canUnshareHost = spawnSync('unshare', ['-m', '-u', 'true']).status === 0;
  it.skipIf(!canUnshareHost)('a start kept out by a run of another host that beats in the ledger says so, not that a lock is held or its file was deleted', async ({ fake, onTestFinished }) => {
    // Pods on two nodes, each with its own lock file, one ledger on a shared volume: only the
    // live run's heartbeat keeps the second out. Its log asked "was the lock file deleted?",
    // and its CronsafeSkipped Event said its own lock, which it held, was held by another run:
    // `kubectl describe` sent the operator after a lock file. (Also the start that takes over
    // a Lease a killed pod on another node left to expire: its heartbeat holds starts off
    // until lease.seconds after its last beat.)
    const ws = workspace({ handler: { command: SLOW }, concurrency: 1, events: { enabled: true } }, { 'a.scc': 'a', 'b.scc': 'b' });
    const markers = path.join(ws.dir, 'markers');
    const onHost = (host: string, config: string) => ['-m', '-u', 'sh', '-c', `hostname ${host} && exec "$0" "$@"`, process.execPath, CLI, 'run', '-c', config];
    // The first run's handlers work until the second run has ended (the gate), not for 3 s each.
    const gate = path.join(ws.dir, 'gate');
    onTestFinished(() => writeFileSync(gate, '')); // a failed test leaves no run waiting on it
    const first = spawnCliRaw('unshare', onHost('node-a', otherPod(ws)), { env: podEnv(fake, 'pod-a', { MARKER_DIR: markers, GATE: gate }), timeoutMs: 120_000 });
    await until(() => filesIn(markers).length === 1, 'the first run to start its handler', 45_000);
    const second = spawnCliRaw('unshare', onHost('node-b', otherPod(ws, 'node-b')), { env: podEnv(fake, 'pod-b') });
    const ended = await second.exited;
    writeFileSync(gate, '');
    expect(ended.code, second.stderr()).toBe(0);
    expect(finished(second)?.outcome).toBe('skipped-locked');
    const skip = second.lines.find((l) => String(l.msg).startsWith('skipped: another run of this job is alive'));
    expect(skip?.msg).toContain('node-a');
    expect(skip?.msg).not.toContain('lock file deleted');
    const skipped = fake.list('events').filter((e) => e.reason === 'CronsafeSkipped');
    expect(skipped.length).toBeGreaterThan(0);
    for (const e of skipped) {
      expect(String(e.message)).toContain('node-a');
      expect(String(e.message)).not.toContain('holds the run lock');
    }
    expect((await first.exited).code, first.stderr()).toBe(0);
    expect(filesIn(markers)).toHaveLength(2); // the first run did both items; the second started none
  }, 120_000);
});

// `KUBECONFIG=<(sops -d kubeconfig.enc) cronsafe run`: the file is a pipe, which can be read
// once. cronsafe read each kubeconfig up to four times (is it empty? load it, its tokenFile,
// and again for each feature): the second read found it empty ("expected a document"), and
// the Lease, the Events and the scheduled time were off where kubectl worked.
describe.concurrent('KUBECONFIG naming a pipe (a shell\'s process substitution)', () => {
  it('a kubeconfig that can be read only once is read once: the Lease is taken and released, Events on, no warning', async ({ fake }) => {
    const ws = workspace({ handler: { command: SLOW }, events: { enabled: true } }, { 'a.scc': 'a' });
    rewriteLock(ws, { kubernetesLease: {} });
    const { KUBECONFIG: kubeconfig, ...env } = podEnv(fake, 'pod-a', { SLOW_MS: '10' });
    const r = spawnCliRaw('bash', ['-c', 'KUBECONFIG=<(cat "$KC") exec "$NODE" "$CLI_JS" run -c "$CFG"'], {
      env: { ...env, KUBECONFIG: '', KC: kubeconfig, NODE: process.execPath, CLI_JS: CLI, CFG: ws.configPath },
    });
    const { code } = await r.exited;
    expect(code, r.stderr()).toBe(0);
    expect(r.lines.filter((l) => /unavailable|cannot load Kubernetes credentials/.test(`${l.msg} ${String(l.reason ?? '')}`)).map((l) => `${l.msg}: ${String(l.reason)}`)).toEqual([]);
    expect(r.lines.find((l) => l.msg === 'Kubernetes Lease released')).toBeDefined();
    expect(lease(fake)).toBeDefined();
    expect(lease(fake)?.spec.holderIdentity).toBeFalsy(); // taken, then handed back
  });
});

/** Workspace config with `lock` extended (its path kept). */
function rewriteLock(ws: Workspace, extra: Obj): void {
  const cfg = YAML.parse(readFileSync(ws.configPath, 'utf8')) as Obj;
  cfg.lock = { path: path.join(ws.state, 'cronsafe.lock'), ...extra };
  writeFileSync(ws.configPath, YAML.stringify(cfg));
}
