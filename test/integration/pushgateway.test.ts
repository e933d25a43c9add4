import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURES, finished, runCli, spawnCli, workspace, type Workspace } from '../helpers/cli.js';
import { find, freePort, parseMetrics, PUSHGATEWAY, scrape, startPushgateway, startServer, value, type Sample, type Server } from '../helpers/prom.js';
import { filesIn, until } from '../helpers/wait.js';

const GATED = path.join(FIXTURES, 'handlers/module-gated.mjs');

/** ok-* items wait for <dir>/gate; bad-* items are dead at once. Each test uses its own job name (its own group). */
function gatedWorkspace(name: string, gateway: string, pushIntervalSeconds: number, files: string[]): Workspace {
  return workspace(
    {
      name,
      handler: { module: GATED },
      concurrency: 2,
      retry: { maxAttempts: 1, backoffSeconds: 1, backoffMaxSeconds: 1 },
      metrics: { pushgateway: gateway, pushIntervalSeconds },
    },
    Object.fromEntries(files.map((f) => [f, f])),
  );
}

/** One ok and one bad item, gate open, one run (exit 0): a succeeded and a dead item in the ledger. */
async function ranOnce(name: string, gateway: string): Promise<Workspace> {
  const ws = gatedWorkspace(name, gateway, 30, ['ok-1.txt', 'bad-1.txt']);
  writeFileSync(path.join(ws.dir, 'gate'), '');
  const run = await runCli(['run', '-c', ws.configPath]);
  expect(run.code, run.stderr).toBe(0);
  return ws;
}

/** The cronsafe series of one group, as the Pushgateway serves them to Prometheus. */
async function group(gw: Server, job: string): Promise<Sample[]> {
  return (await scrape(gw.url)).filter((s) => s.labels.job === job && (s.name.startsWith('cronsafe_') || s.name.startsWith('push_')));
}

/** Read the group until `ok` holds (the push is asynchronous to the process we watch). */
async function groupUntil(gw: Server, job: string, ok: (g: Sample[]) => boolean, what: string): Promise<Sample[]> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const g = await group(gw, job);
    if (ok(g)) return g;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; group ${job}: ${JSON.stringify(g)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A real Pushgateway behind basic auth (its --web.config.file), for `body` with its host:port
 * and a reader of one job's group. Users: `cronsafe` with password `50%off; x=1`, and
 * `tok123456789abc` with an empty password (a token given as the user). bcrypt, cost 4.
 */
async function withAuthedGateway(body: (hostPort: string, read: (job: string) => Promise<Sample[]>) => Promise<void>): Promise<void> {
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-pgw-auth-'));
  const webConfig = path.join(dir, 'web.yaml');
  writeFileSync(
    webConfig,
    [
      'basic_auth_users:',
      '  cronsafe: $2b$04$nfSZX.jibvdMGS8e9GEDf.xZqBHeiSad.tkVFqlDSpe/.4mbuE0xi',
      '  tok123456789abc: $2b$04$kpqkFD6qqTdcuyfz6nMy0OCouaamgdOgy9iEZKQ1lHApohlVy7v4q',
      '',
    ].join('\n'),
  );
  const headers = { authorization: `Basic ${Buffer.from('cronsafe:50%off; x=1').toString('base64')}` };
  const gw = await startServer(PUSHGATEWAY!, [`--web.listen-address=127.0.0.1:${port}`, `--web.config.file=${webConfig}`, '--persistence.file='], port, '/-/ready', 20_000, headers);
  try {
    await body(`127.0.0.1:${port}`, async (job) => {
      const r = await fetch(`${gw.url}/metrics`, { headers });
      if (!r.ok) throw new Error(`GET ${gw.url}/metrics: ${r.status}`);
      return parseMetrics(await r.text()).filter((x) => x.labels.job === job);
    });
  } finally {
    await gw.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

describe.skipIf(!PUSHGATEWAY)('Pushgateway (Debian prometheus-pushgateway on loopback, the built CLI)', () => {
  let gw: Server;
  beforeAll(async () => {
    gw = await startPushgateway();
  });
  afterAll(async () => {
    await gw?.stop();
  });

  it('each run pushes one group per job, and a second run in a new process keeps counting', async () => {
    const job = 'pg-totals';
    const ws = await ranOnce(job, gw.url);
    let g = await group(gw, job);
    expect(find(g, 'push_time_seconds')).toHaveLength(1); // one group: /metrics/job/pg-totals
    // No pod or instance identity in the series: the next pod's push replaces them.
    expect(new Set(g.map((s) => s.labels.instance))).toEqual(new Set(['']));
    expect(find(g, 'push_failure_time_seconds').map((s) => s.value)).toEqual([0]);
    expect(value(g, 'cronsafe_items_processed_total', { result: 'succeeded' })).toBe(1);
    expect(value(g, 'cronsafe_items_processed_total', { result: 'dead' })).toBe(1);
    expect(value(g, 'cronsafe_dead_lettered_total')).toBe(1);
    expect(value(g, 'cronsafe_dead_letter_items')).toBe(1);
    expect(value(g, 'cronsafe_runs_total', { outcome: 'completed' })).toBe(1);
    expect(value(g, 'cronsafe_in_flight_items')).toBe(0);
    const success1 = value(g, 'cronsafe_last_success_timestamp_seconds');
    expect(success1).toBeGreaterThan(Date.now() / 1000 - 60);

    // A new process, as the next CronJob pod would be: totals continue from the ledger.
    writeFileSync(path.join(ws.source, 'ok-2.txt'), 'x');
    writeFileSync(path.join(ws.source, 'bad-2.txt'), 'x');
    const second = await runCli(['run', '-c', ws.configPath]);
    expect(second.code, second.stderr).toBe(0);
    g = await group(gw, job);
    expect(find(g, 'push_time_seconds')).toHaveLength(1);
    expect(value(g, 'cronsafe_items_processed_total', { result: 'succeeded' })).toBe(2);
    expect(value(g, 'cronsafe_items_processed_total', { result: 'dead' })).toBe(2);
    expect(value(g, 'cronsafe_dead_lettered_total')).toBe(2);
    expect(value(g, 'cronsafe_runs_total', { outcome: 'completed' })).toBe(2);
    expect(value(g, 'cronsafe_last_success_timestamp_seconds')).toBeGreaterThanOrEqual(success1);
    // The histogram continues from the ledger too (it was per process: 1, the same as the
    // last pod's, and Prometheus saw no reset and counted nothing).
    expect(value(g, 'cronsafe_item_duration_seconds_count', { result: 'succeeded' })).toBe(2);
  });

  it('a skipped start (lock held) pushes: overruns and lock skips go up, the running pass keeps its live gauges', async () => {
    const job = 'pg-skip';
    // An hour between pushes: after its start push the holder is silent, so what changes is the skips' doing.
    const ws = gatedWorkspace(job, gw.url, 3600, ['ok-1.txt']);
    const holder = spawnCli(['run', '-c', ws.configPath]);
    try {
      await until(() => filesIn(path.join(ws.dir, 'markers')).length === 1, 'the holder to start its handler');
      let g = await groupUntil(gw, job, (x) => find(x, 'cronsafe_in_flight_items').length === 1, "the holder's start push");
      expect(value(g, 'cronsafe_overruns_total')).toBe(0);

      for (const n of [1, 2]) {
        const skip = await runCli(['run', '-c', ws.configPath]);
        expect(skip.code, skip.stderr).toBe(0);
        expect(finished(skip)?.outcome).toBe('skipped-locked');
        g = await group(gw, job);
        expect(value(g, 'cronsafe_overruns_total')).toBe(n);
        expect(value(g, 'cronsafe_lock_skips_total')).toBe(n);
        expect(value(g, 'cronsafe_runs_total', { outcome: 'skipped-locked' })).toBe(n);
        // POST, not PUT: the holder's live gauge and histogram are still in the group.
        expect(find(g, 'cronsafe_in_flight_items')).toHaveLength(1);
        expect(find(g, 'cronsafe_item_duration_seconds_count')).toHaveLength(6); // one per result
      }
    } finally {
      writeFileSync(path.join(ws.dir, 'gate'), '');
      expect((await holder.exited).code, holder.stderr()).toBe(0);
    }
    const end = await group(gw, job);
    expect(value(end, 'cronsafe_runs_total', { outcome: 'completed' })).toBe(1);
    expect(value(end, 'cronsafe_overruns_total')).toBe(2);
    expect(value(end, 'cronsafe_in_flight_items')).toBe(0);
  });

  // With only a Pushgateway (no scrape of a live pod), the group kept the old dead-letter
  // gauge after an operator's retry until the next run pushed: a daily job's
  // CronsafeDeadLetters alert went on firing all day for items already put back.
  it('dead-letter retry and requeue push the ledger metrics at once; stdout stays the command output', async () => {
    const job = 'pg-operator';
    const ws = await ranOnce(job, gw.url);
    let g = await group(gw, job);
    expect(value(g, 'cronsafe_dead_letter_items')).toBe(1);
    expect(value(g, 'cronsafe_items_requeued_total')).toBe(0);

    const retry = await runCli(['dead-letter', 'retry', '--all', '-c', ws.configPath]);
    expect(retry.code, retry.stderr).toBe(0);
    expect(retry.stdout).toBe('requeued 1 dead item\n');
    g = await group(gw, job);
    expect(value(g, 'cronsafe_dead_letter_items')).toBe(0);
    expect(value(g, 'cronsafe_items_requeued_total')).toBe(1);
    expect(value(g, 'cronsafe_items', { state: 'pending' })).toBe(1);
    // POST: the run's own series (its histogram) are still in the group.
    expect(find(g, 'cronsafe_item_duration_seconds_count').length).toBeGreaterThan(0);

    const requeue = await runCli(['requeue', '--all', '--json', '-c', ws.configPath]);
    expect(requeue.code, requeue.stderr).toBe(0);
    expect(JSON.parse(requeue.stdout)).toMatchObject({ dryRun: false, count: 1, first: ['ok-1.txt'] });
    g = await group(gw, job);
    expect(value(g, 'cronsafe_items_requeued_total')).toBe(2);
    expect(value(g, 'cronsafe_items', { state: 'done' })).toBe(0);

    // A dry run changes nothing, so it pushes nothing (the group's push time stays).
    const pushed = value(g, 'push_time_seconds');
    const dry = await runCli(['requeue', '--all', '--include-dead', '--dry-run', '-c', ws.configPath]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(value(await group(gw, job), 'push_time_seconds')).toBe(pushed);
  });

  it('a retry whose push fails still succeeds, with the warning on stderr only', async () => {
    const port = await freePort(); // nothing listens there
    const ws = gatedWorkspace('pg-operator-down', `http://127.0.0.1:${port}`, 30, ['bad-1.txt']);
    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);
    const retry = await runCli(['dead-letter', 'retry', '--all', '-c', ws.configPath]);
    expect(retry.code, retry.stderr).toBe(0);
    expect(retry.stdout).toBe('requeued 1 dead item\n');
    expect(retry.stderr).toContain('metrics push failed (nothing else is affected)');
    expect(retry.stderr).toContain('dead-letter retry');
  });

  // A Pushgateway served under a path (--web.route-prefix, or behind an ingress at a path),
  // written with a trailing slash as URLs often are: it answered 301 to `/pgw//metrics/...`,
  // which passed for a successful push, and nothing ever landed.
  it('a gateway under a path prefix, given with a trailing slash: the run lands in its group', async () => {
    const port = await freePort();
    const prefixed = await startServer(PUSHGATEWAY!, [`--web.listen-address=127.0.0.1:${port}`, '--web.route-prefix=/pgw', '--persistence.file='], port, '/pgw/-/ready');
    try {
      const job = 'pg-prefix';
      const ws = gatedWorkspace(job, `${prefixed.url}/pgw/`, 30, ['ok-1.txt']);
      writeFileSync(path.join(ws.dir, 'gate'), '');
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.lines.filter((l) => String(l.msg).startsWith('metrics push failed'))).toEqual([]);
      const g = (await scrape(`${prefixed.url}/pgw`)).filter((x) => x.labels.job === job);
      expect(value(g, 'cronsafe_runs_total', { outcome: 'completed' })).toBe(1);
    } finally {
      await prefixed.stop();
    }
  });

  // A password from a Secret through ${VAR} (as the chart's NOTES advise), holding a '%' that
  // starts no %XX escape: the push client's URL parser threw "URI malformed" at every push,
  // so nothing ever landed and the alerts saw no series, with no word about the password.
  // Its blank, ';' and '=' are percent-encoded by the URL parser and must come back as such.
  it('a password with a raw "%" (from ${VAR}) is sent as written: the run lands in its group', async () => {
    const PASSWORD = '50%off; x=1';
    await withAuthedGateway(async (url, read) => {
      const job = 'pg-auth-percent';
      const ws = gatedWorkspace(job, `http://cronsafe:\${PUSHGATEWAY_PASSWORD}@${url}`, 30, ['ok-1.txt']);
      writeFileSync(path.join(ws.dir, 'gate'), '');
      const r = await runCli(['run', '-c', ws.configPath], { env: { PUSHGATEWAY_PASSWORD: PASSWORD } });
      expect(r.code, r.stderr).toBe(0);
      expect(r.lines.filter((l) => String(l.msg).startsWith('metrics push failed'))).toEqual([]);
      expect(value(await read(job), 'cronsafe_runs_total', { outcome: 'completed' })).toBe(1);
      expect(r.stdout + r.stderr).not.toContain('50%off');
    });
  });

  // A token given as the user (`https://TOKEN@gw`, or `TOKEN:@` as curl's `-u TOKEN:`) went out
  // as `Authorization: Basic base64(TOKEN)`, without the ':' that RFC 7617 requires before the
  // (empty) password: the Pushgateway (Go's BasicAuth) answered 401 to every push.
  it('a token as the user alone (TOKEN@ or TOKEN:@) is sent with its empty password: the run lands in its group', async () => {
    await withAuthedGateway(async (url, read) => {
      for (const [job, userinfo] of [['pg-auth-token', 'tok123456789abc@'], ['pg-auth-token-colon', 'tok123456789abc:@']] as const) {
        const ws = gatedWorkspace(job, `http://${userinfo}${url}`, 30, ['ok-1.txt']);
        writeFileSync(path.join(ws.dir, 'gate'), '');
        const r = await runCli(['run', '-c', ws.configPath]);
        expect(r.code, r.stderr).toBe(0);
        expect(r.lines.filter((l) => String(l.msg).startsWith('metrics push failed')), userinfo).toEqual([]);
        expect(value(await read(job), 'cronsafe_runs_total', { outcome: 'completed' }), userinfo).toBe(1);
      }
    });
  });
});

// Debian's pushgateway persists to /var/lib/prometheus/pushgateway.data unless told not to.
// The helper's gateways wrote every test's groups there on shutdown and loaded them all at
// start: a test reading its group back could pass on what an earlier run had pushed
// (unreadable-dir.test.ts's skipped-dirs group was already there), and tests on one machine
// leaked series into each other.
describe.skipIf(!PUSHGATEWAY)('the test Pushgateway (helpers/prom.ts)', () => {
  it('starts empty: a group the previous one held is not loaded from a persistence file', async () => {
    const job = `persist-probe-${process.pid}`;
    const first = await startPushgateway();
    try {
      const put = await fetch(`${first.url}/metrics/job/${job}`, { method: 'PUT', body: 'cronsafe_probe 1\n' });
      expect(put.status).toBe(200);
    } finally {
      await first.stop(); // a persisting gateway writes its file now
    }
    const second = await startPushgateway();
    try {
      expect((await scrape(second.url)).filter((s) => s.labels.job === job)).toEqual([]);
    } finally {
      await second.stop();
    }
  });
});
