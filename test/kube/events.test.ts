/**
 * Kubernetes Events through @kubernetes/client-node against the fake API server: on the
 * Job and its CronJob (found through the downward API env or the pod), rate-limited,
 * switched off with one log line at a refusal (403), and kept on through a 503 or a timeout.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/types.js';
import { MAX_EVENTS_PER_REASON, noEvents, openEventSink, REASONS, withDeadLetterEvents } from '../../src/kube/events.js';
import { FakeApiServer, startFakeApiServer, type Obj } from '../helpers/fake-apiserver.js';
import { memoryLogger } from '../helpers/log.js';
import { until } from '../helpers/wait.js';

let fake: FakeApiServer;
let cronJobUid: string;
let jobUid: string;

beforeEach(async () => {
  fake = await startFakeApiServer('batch');
  cronJobUid = 'cj-uid-1';
  const job = fake.seed('jobs', {
    metadata: {
      name: 'qc-29000000',
      ownerReferences: [{ apiVersion: 'batch/v1', kind: 'CronJob', name: 'qc', uid: cronJobUid, controller: true }],
    },
  });
  jobUid = job.metadata.uid as string;
  fake.seed('pods', {
    metadata: { name: 'qc-29000000-abcde', ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'qc-29000000', uid: jobUid, controller: true }] },
  });
});

afterEach(async () => {
  await fake.close();
});

const config = { drain: { gracePeriodSeconds: 30, marginSeconds: 5 }, events: { enabled: true } } as Config;
const podEnv = () => ({ KUBECONFIG: fake.kubeconfig, CRONSAFE_POD_NAME: 'qc-29000000-abcde', CRONSAFE_POD_NAMESPACE: 'batch' });
const jobEnv = () => ({ ...podEnv(), CRONSAFE_JOB_NAME: 'qc-29000000', CRONSAFE_JOB_UID: jobUid });
const events = (): Obj[] => fake.list('events');
const on = (kind: string) => events().filter((e) => e.involvedObject.kind === kind);

describe('Events on the Job and its CronJob', () => {
  it('a skipped start, an overrun and a dead letter, as Warnings with the right involvedObject', async () => {
    const sink = await openEventSink(config, memoryLogger().log, jobEnv());
    sink.skipped('the Kubernetes Lease batch/qc is held by pod-x/run-1');
    sink.overrun(new Date('2026-11-30T10:15:00Z'));
    sink.deadLettered('captions/ep-01.scc', 'corrupt input: line 3');
    await sink.flush();

    const all = [REASONS.skipped, REASONS.overrun, REASONS.deadLetter].sort();
    expect(on('Job').map((e) => e.reason).sort()).toEqual(all);
    expect(on('CronJob').map((e) => e.reason).sort()).toEqual(all);
    for (const e of on('Job')) {
      expect(e.involvedObject).toEqual({ apiVersion: 'batch/v1', kind: 'Job', name: 'qc-29000000', namespace: 'batch', uid: jobUid });
    }
    for (const e of on('CronJob')) {
      expect(e.involvedObject).toEqual({ apiVersion: 'batch/v1', kind: 'CronJob', name: 'qc', namespace: 'batch', uid: cronJobUid });
    }
    for (const e of events()) {
      expect(e).toMatchObject({ type: 'Warning', source: { component: 'cronsafe' }, reportingInstance: 'qc-29000000-abcde', count: 1 });
      expect(e.metadata.name).toMatch(new RegExp(`^${e.involvedObject.name}\\.`));
    }
    const byReason = (r: string) => on('Job').find((e) => e.reason === r);
    const [skip, overrun, dead] = [byReason(REASONS.skipped), byReason(REASONS.overrun), byReason(REASONS.deadLetter)];
    expect(skip!.message).toContain('held by pod-x/run-1');
    expect(overrun!.message).toContain('2026-11-30T10:15:00.000Z');
    expect(dead!.message).toBe('Item "captions/ep-01.scc" was dead-lettered: corrupt input: line 3');
  });

  it('control characters in a message are shown escaped, as the log shows them, never raw', async () => {
    // A handler's colored stderr (ESC), a title-setting OSC (U+009D) and a CSI (U+009B)
    // reach `kubectl describe` through the message; an id can hold C1 controls too.
    const sink = await openEventSink(config, memoryLogger().log, jobEnv());
    sink.deadLettered('ep\u009b2J.scc', 'bad frame\u001b[31m red\u009d0;pwned\u0007\nline 2\u009b2J');
    sink.skipped('the Kubernetes Lease batch/qc is held by pod\u009b2J');
    await sink.flush();
    const messages = on('Job').map((e) => e.message as string);
    expect(messages).toHaveLength(2);
    for (const m of messages) expect(m).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
    const dead = on('Job').find((e) => e.reason === REASONS.deadLetter)!.message;
    expect(dead).toBe('Item "ep\\u009b2J.scc" was dead-lettered: bad frame\\u001b[31m red\\u009d0;pwned\\u0007\\u000aline 2\\u009b2J');
  });

  it('characters a terminal does not show (bidi controls, zero-width ones) are escaped, as the text listings show them', async () => {
    // Before: only C0/C1 controls were, so `kubectl describe` showed `invoice<RLO>gpj.exe`
    // as `invoiceexe.jpg` and `a<ZWSP>.txt` as `a.txt`, another item.
    const sink = await openEventSink(config, memoryLogger().log, jobEnv());
    sink.deadLettered('invoice\u202egpj.exe', 'bad\u200binput\u{e0041}');
    await sink.flush();
    const dead = on('Job').find((e) => e.reason === REASONS.deadLetter)!.message as string;
    expect(dead).toBe('Item "invoice\\u202egpj.exe" was dead-lettered: bad\\u200binput\\udb40\\udc41');
  });

  it('finds the Job from the pod when the env does not name it (get pods)', async () => {
    const sink = await openEventSink(config, memoryLogger().log, podEnv());
    sink.overrun(new Date());
    await sink.flush();
    expect(on('Job')[0]?.involvedObject).toMatchObject({ name: 'qc-29000000', uid: jobUid });
    expect(on('CronJob')).toHaveLength(1);
  });

  it('without `get jobs` it posts on the Job only, with the uid from the downward API', async () => {
    fake.deny('get', 'jobs');
    const { log, lines } = memoryLogger();
    const sink = await openEventSink(config, log, jobEnv());
    sink.overrun(new Date());
    await sink.flush();
    expect(events().map((e) => e.involvedObject.kind)).toEqual(['Job']);
    expect(on('Job')[0]?.involvedObject.uid).toBe(jobUid);
    expect(lines.filter((l) => String(l.msg).includes('posting on the Job only'))).toHaveLength(1);
  });

  it('dead letters are rate-limited: at most 10 per run, then one summary', async () => {
    const sink = await openEventSink(config, memoryLogger().log, jobEnv());
    for (let i = 0; i < 25; i++) sink.deadLettered(`item-${i}`, 'boom');
    await sink.flush();
    const dead = on('Job').filter((e) => e.reason === REASONS.deadLetter);
    expect(dead).toHaveLength(MAX_EVENTS_PER_REASON + 1);
    const messages = dead.map((e) => e.message as string);
    expect(messages.filter((m) => m.startsWith('Item ')).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `Item "item-${i}" was dead-lettered: boom`).sort());
    expect(messages.filter((m) => m.startsWith(`More than ${MAX_EVENTS_PER_REASON}`))).toHaveLength(1);
    // Another reason has its own budget.
    sink.overrun(new Date());
    await sink.flush();
    expect(on('Job').filter((e) => e.reason === REASONS.overrun)).toHaveLength(1);
  });

  it('a 403 logs one line and turns Events off for the rest of the run', async () => {
    fake.deny('create', 'events');
    const { log, lines } = memoryLogger();
    const sink = await openEventSink(config, log, jobEnv());
    sink.skipped();
    await sink.flush();
    for (let i = 0; i < 5; i++) sink.deadLettered(`item-${i}`, 'boom');
    sink.overrun(new Date());
    await sink.flush();
    const tries = fake.requests.filter((r) => r.resource === 'events');
    expect(tries.length).toBeLessThanOrEqual(2); // the first Event's posts (Job, CronJob), nothing after
    expect(tries.every((r) => r.status === 403)).toBe(true);
    const off = lines.filter((l) => String(l.msg).startsWith('Kubernetes Events disabled'));
    expect(off).toHaveLength(1);
    expect(off[0]!.msg).toContain('grant `create` on `events`');
    expect(String(off[0]!.reason)).toContain('403');
  });

  it('an unreachable API server: one line, no throw', async () => {
    const { log, lines } = memoryLogger();
    const sink = await openEventSink(config, log, jobEnv());
    await fake.close();
    sink.overrun(new Date());
    sink.overrun(new Date());
    await sink.flush();
    expect(lines.filter((l) => String(l.msg).startsWith('Kubernetes Events'))).toHaveLength(1);
    expect(String(lines.find((l) => String(l.msg).startsWith('Kubernetes Events'))?.reason)).toContain('cannot reach the API server');
    fake = await startFakeApiServer();
  });

  // An API server restarting (a control plane upgrade), throttling (429) or slow for a
  // moment: the first such answer turned Events off for the rest of the run, so a long run
  // reported none of its later dead letters.
  it('a 503 costs one Event at most: it is tried again, and the Events after it are posted', async () => {
    const { log, lines } = memoryLogger();
    const sink = await openEventSink(config, log, jobEnv());
    const posts = () => fake.requests.filter((r) => r.resource === 'events');

    // One 503 for each of the first Event's two posts (Job, CronJob): both are tried again.
    let failures = 2;
    fake.onRequest = (_verb, resource) => {
      fake.down = resource === 'events' && failures-- > 0;
    };
    sink.deadLettered('item-1', 'boom');
    await until(() => posts().filter((r) => r.status === 201).length === 2, 'the first Event to be posted on its second try');

    // An API server down for a while: the Event is skipped (one line), the next one is posted.
    fake.onRequest = () => undefined;
    fake.down = true;
    sink.deadLettered('item-2', 'boom');
    await until(() => lines.some((l) => String(l.msg).startsWith('Kubernetes Events: an Event could not be posted')), 'the Event to be given up');
    // Both of its posts (Job and CronJob) tried twice: a loaded machine's CronJob post may still be in its retry.
    await until(() => posts().filter((r) => r.status === 503).length === 6, "item-2's four refused tries");
    fake.down = false;
    sink.deadLettered('item-3', 'boom');
    sink.overrun(new Date('2026-11-30T10:15:00Z'));
    await sink.flush();

    const items = on('Job').map((e) => String(e.message)).filter((m) => m.startsWith('Item ')).sort();
    expect(items).toEqual(['Item "item-1" was dead-lettered: boom', 'Item "item-3" was dead-lettered: boom']);
    expect(on('CronJob').map((e) => e.reason).sort()).toEqual([REASONS.deadLetter, REASONS.deadLetter, REASONS.overrun]);
    expect(posts().filter((r) => r.status === 503)).toHaveLength(6); // item-1's first tries, item-2's two
    expect(lines.filter((l) => String(l.msg).startsWith('Kubernetes Events disabled'))).toEqual([]);
    expect(lines.filter((l) => String(l.msg).startsWith('Kubernetes Events: an Event could not be posted'))).toHaveLength(1);
  });

  it('the end of a stopped run (SIGTERM) does not wait to try a failed Event again: it fits in the drain margin', async () => {
    const { log, lines } = memoryLogger();
    const sink = await openEventSink(config, log, jobEnv());
    fake.down = true;
    sink.deadLettered('item-1', 'boom');
    await until(() => fake.requests.filter((r) => r.resource === 'events' && r.status === 503).length === 2, 'the posts to be refused');
    const started = performance.now();
    await sink.flush(AbortSignal.abort());
    expect(performance.now() - started).toBeLessThan(500); // not the second's pause before the retry
    expect(fake.requests.filter((r) => r.resource === 'events')).toHaveLength(2);
    expect(lines.filter((l) => String(l.msg).startsWith('Kubernetes Events: an Event could not be posted'))).toHaveLength(1);
  });

  /** An Event sink whose one post hangs on the API server (10 s), once the post is there. */
  async function hungPost() {
    const { log, lines } = memoryLogger();
    const sink = await openEventSink(config, log, jobEnv());
    let asked = false;
    fake.latency = () => {
      asked = true;
      return 10_000;
    };
    sink.deadLettered('item-1', 'boom');
    await until(() => asked, 'the post to reach the API server');
    return { sink, lines };
  }

  it('a post hung on the API server is cut a quarter of the drain margin into the end of a stopped run, not after the 5 s a call may take', async () => {
    const { sink, lines } = await hungPost();
    const started = performance.now();
    await sink.flush(AbortSignal.abort());
    const took = performance.now() - started;
    expect(took).toBeGreaterThan(1000);
    expect(took).toBeLessThan(2500); // 1.25 s: a quarter of the 5 s margin
    expect(lines.filter((l) => String(l.msg).startsWith('Kubernetes Events: an Event could not be posted'))).toHaveLength(1);
  });

  it('a SIGTERM while the end of the run waits for an Event cuts it at the margin\'s bound, not the 5 s a call may take', async () => {
    const { sink } = await hungPost();
    const stop = new AbortController();
    const flushed = sink.flush(stop.signal);
    setTimeout(() => stop.abort(), 200);
    const started = performance.now();
    await flushed;
    expect(performance.now() - started).toBeLessThan(2500); // 0.2 s, then 1.25 s: a quarter of the 5 s margin
  });

  it('outside a Job (no pod or Job name) Events are off for the run, said once', async () => {
    const { log, lines } = memoryLogger();
    const sink = await openEventSink(config, log, { KUBECONFIG: fake.kubeconfig });
    expect(sink).toBe(noEvents);
    expect(lines).toHaveLength(1);
    expect(String(lines[0]!.reason)).toContain('CRONSAFE_JOB_NAME');
  });

  it('disabled: a no-op sink and no API call', async () => {
    const sink = await openEventSink({ ...config, events: { enabled: false } }, memoryLogger().log, jobEnv());
    expect(sink).toBe(noEvents);
    expect(await openEventSink({ ...config, events: undefined }, memoryLogger().log, jobEnv())).toBe(noEvents);
    expect(fake.requests).toHaveLength(0);
  });
});

describe('withDeadLetterEvents', () => {
  it('keeps the metrics observer and also tells the sink', () => {
    const seen: string[] = [];
    const observer = { attempt: (o: string) => void seen.push(`attempt:${o}`), live: () => void seen.push('live'), deadLettered: (id: string) => void seen.push(`obs:${id}`) };
    const sink = { ...noEvents, deadLettered: (id: string) => void seen.push(`event:${id}`) };
    const merged = withDeadLetterEvents(observer, sink);
    merged.attempt('dead', 5);
    merged.live?.(() => ({}) as never);
    merged.deadLettered?.('a', 'boom');
    expect(seen).toEqual(['attempt:dead', 'live', 'obs:a', 'event:a']);
    expect(withDeadLetterEvents(observer, noEvents)).toBe(observer);
  });
});
