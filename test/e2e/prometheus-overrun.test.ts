import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURES, finished, ROOT, runCli, spawnCli, workspace } from '../helpers/cli.js';
import { freePort, PROMETHEUS, PUSHGATEWAY, startPushgateway, startServer, type Server } from '../helpers/prom.js';
import { filesIn, until } from '../helpers/wait.js';

/**
 * The whole chain, real parts only: cronsafe CLI -> Pushgateway -> Prometheus (scraping it
 * every second with honor_labels) -> our rule file. The rule file is loaded as shipped,
 * except that its windows shrink from 1h to 30s so the test fits in well under a minute;
 * the expressions are otherwise the same.
 */
const JOB = 'e2e-overruns';
const WINDOW = '30s';

interface Alert {
  labels: Record<string, string>;
  state: 'pending' | 'firing';
}
interface Rule {
  name: string;
  state?: string;
  lastEvaluation: string;
}

describe.skipIf(!PROMETHEUS || !PUSHGATEWAY)('overrun alert end to end (real Pushgateway + Prometheus on loopback)', () => {
  let gw: Server | undefined;
  let prom: Server | undefined;
  const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-prom-'));

  beforeAll(async () => {
    gw = await startPushgateway();
    const rules = readFileSync(path.join(ROOT, 'deploy/prometheus/cronsafe-rules.yaml'), 'utf8').replaceAll('[1h]', `[${WINDOW}]`);
    writeFileSync(path.join(dir, 'rules.yaml'), rules);
    writeFileSync(
      path.join(dir, 'prometheus.yml'),
      [
        'global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}',
        `rule_files: [${JSON.stringify(path.join(dir, 'rules.yaml'))}]`,
        'scrape_configs:',
        '  - job_name: pushgateway',
        '    honor_labels: true',
        `    static_configs: [{targets: [${JSON.stringify(new URL(gw.url).host)}]}]`,
        '',
      ].join('\n'),
    );
    const port = await freePort();
    prom = await startServer(
      PROMETHEUS!,
      [`--config.file=${path.join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
      port,
      '/-/ready',
    );
  });

  afterAll(async () => {
    await prom?.stop();
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const api = async <T>(p: string): Promise<T> => {
    const r = await fetch(`${prom!.url}/api/v1/${p}`);
    const body = (await r.json()) as { status: string; data: T };
    if (body.status !== 'success') throw new Error(`${p}: ${JSON.stringify(body)}`);
    return body.data;
  };
  const overruns = async (): Promise<number | undefined> => {
    const data = await api<{ result: Array<{ value: [number, string] }> }>(`query?query=${encodeURIComponent(`cronsafe_overruns_total{job="${JOB}"}`)}`);
    return data.result[0] ? Number(data.result[0].value[1]) : undefined;
  };
  const overrunRule = async (): Promise<Rule> => {
    const data = await api<{ groups: Array<{ rules: Rule[] }> }>('rules?type=alert');
    const rule = data.groups.flatMap((g) => g.rules).find((r) => r.name === 'CronsafeRepeatedOverruns');
    if (!rule) throw new Error('CronsafeRepeatedOverruns is not loaded');
    return rule;
  };
  const overrunAlerts = async (): Promise<Alert[]> =>
    (await api<{ alerts: Array<Alert & { labels: { alertname: string } }> }>('alerts')).alerts.filter((a) => a.labels.alertname === 'CronsafeRepeatedOverruns');

  /** Poll an async condition (Prometheus works on its own clock): resolves once true. */
  async function eventually(cond: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await cond())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\nprometheus log tail:\n${prom!.log().slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  it('one skipped start does not page; three within the window do', { timeout: 60_000 }, async () => {
    const ws = workspace(
      {
        name: JOB,
        handler: { module: path.join(FIXTURES, 'handlers/module-gated.mjs') },
        concurrency: 1,
        metrics: { pushgateway: gw!.url, pushIntervalSeconds: 1 },
      },
      { 'ok-1.txt': 'x' },
    );
    // The holder: its handler waits for the gate, so it keeps the lock for the whole test.
    const holder = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 55_000 });
    try {
      await until(() => filesIn(path.join(ws.dir, 'markers')).length === 1, 'the holding run to start its handler');
      // A baseline sample of 0 first: increase() cannot count what happened before a series existed.
      await eventually(async () => (await overruns()) === 0, 'Prometheus to scrape overruns = 0 from the Pushgateway');

      const skip = async () => {
        const r = await runCli(['run', '-c', ws.configPath]);
        expect(r.code, r.stderr).toBe(0);
        expect(finished(r)?.outcome).toBe('skipped-locked');
      };

      await skip();
      await eventually(async () => (await overruns()) === 1, 'Prometheus to see the first overrun');
      const seen = Date.now();
      // Wait for an evaluation that saw it (a whole interval after it was scraped), then: quiet.
      await eventually(async () => Date.parse((await overrunRule()).lastEvaluation) > seen + 1000, 'a rule evaluation after the first overrun');
      expect((await overrunRule()).state).toBe('inactive');
      expect(await overrunAlerts()).toEqual([]);

      await skip();
      await skip();
      await eventually(async () => (await overrunAlerts()).some((a) => a.state === 'firing'), 'CronsafeRepeatedOverruns to fire');
      const [alert] = await overrunAlerts();
      // honor_labels: the job is cronsafe's, not the scrape job's ("pushgateway").
      expect(alert?.labels).toMatchObject({ alertname: 'CronsafeRepeatedOverruns', job: JOB, severity: 'page' });
    } finally {
      writeFileSync(path.join(ws.dir, 'gate'), '');
      const { code } = await holder.exited;
      expect(code, holder.stderr()).toBe(0);
    }
  });
});
