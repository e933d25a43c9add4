import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { createMetrics } from '../../src/metrics/registry.js';
import { ROOT } from '../helpers/cli.js';
import { PROMTOOL, PROMTOOL_TIMEOUT_MS, promtool } from '../helpers/prom.js';

const DIR = path.join(ROOT, 'deploy/prometheus');
const RULES = path.join(DIR, 'cronsafe-rules.yaml');
const TESTS = path.join(DIR, 'cronsafe-rules.test.yaml');
const REQUIRED = ['CronsafeRepeatedOverruns', 'CronsafeDeadLettersGrowing', 'CronsafeDeadLetters', 'CronsafeNoRecentSuccess', 'CronsafeRunsFailing'];

const scratch = mkdtempSync(path.join(tmpdir(), 'cronsafe-rules-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface RuleTests {
  tests: Array<{ name: string; alert_rule_test?: Array<{ alertname: string }> }>;
}

/**
 * A copy of the rule file with one edit, next to a copy of the unit tests (which name it
 * relatively). With `about`, the copy keeps only the unit tests' groups that test that alert:
 * an edit to one alert's expression changes no other alert's result (and the whole file
 * passes on the unedited rules: "promtool test rules" above), so those groups fail exactly
 * when the whole file would. That leaves out the 71-hour group on dead letters (~7 of the
 * file's ~9 s of CPU per promtool run), which none of these edits is about.
 */
function mutated(name: string, edit: (rules: string) => string, about?: string): { rules: string; tests: string } {
  const original = readFileSync(RULES, 'utf8');
  const changed = edit(original);
  expect(changed, 'the edit must change the file').not.toBe(original);
  const dir = mkdtempSync(path.join(scratch, `${name}-`));
  writeFileSync(path.join(dir, 'cronsafe-rules.yaml'), changed);
  if (about === undefined) copyFileSync(TESTS, path.join(dir, 'cronsafe-rules.test.yaml'));
  else {
    const all = YAML.parse(readFileSync(TESTS, 'utf8')) as RuleTests;
    const tests = all.tests.filter((t) => t.alert_rule_test?.some((a) => a.alertname === about));
    expect(tests.length, `unit test groups about ${about}`).toBeGreaterThan(0);
    writeFileSync(path.join(dir, 'cronsafe-rules.test.yaml'), YAML.stringify({ ...all, tests }));
  }
  return { rules: path.join(dir, 'cronsafe-rules.yaml'), tests: path.join(dir, 'cronsafe-rules.test.yaml') };
}

describe('alert rules: every alert is documented', () => {
  const doc = YAML.parse(readFileSync(RULES, 'utf8')) as { groups: Array<{ rules: Array<Record<string, unknown>> }> };
  const alerts = doc.groups.flatMap((g) => g.rules).filter((r) => typeof r.alert === 'string');
  const runbook = readFileSync(path.join(ROOT, 'docs/operations.md'), 'utf8');

  it('has the required alerts, each with summary, description and a runbook section that exists', () => {
    expect(alerts.map((a) => a.alert)).toEqual(expect.arrayContaining(REQUIRED));
    for (const a of alerts) {
      const ann = a.annotations as Record<string, string>;
      expect(ann.summary, String(a.alert)).toBeTruthy();
      expect(ann.description, String(a.alert)).toBeTruthy();
      expect(ann.runbook_url).toBe(`docs/operations.md#${String(a.alert).toLowerCase()}`);
      expect(runbook, `docs/operations.md needs a "### ${String(a.alert)}" section`).toContain(`\n### ${String(a.alert)}\n`);
    }
  });
});

describe.skipIf(!PROMTOOL)('alert rules under promtool (Debian prometheus)', { timeout: 2 * PROMTOOL_TIMEOUT_MS + 10_000 }, () => {
  it('promtool check rules accepts the rule file', () => {
    const r = promtool('check', 'rules', RULES);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/SUCCESS: \d+ rules found/);
  });

  it('promtool test rules: every alert fires when it should and stays quiet when it should not', () => {
    const r = promtool('test', 'rules', TESTS);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('SUCCESS');
  });

  it('a broken copy fails the check', () => {
    const { rules } = mutated('broken', (s) => s.replace('min by (namespace, job) (min_over_time(cronsafe_overruns_total[1h]))\n          ) >= 3', 'min by (namespace, job) (min_over_time(cronsafe_overruns_total[1h]))\n           >= 3'));
    const r = promtool('check', 'rules', rules);
    expect(r.code, r.out).not.toBe(0);
    expect(r.out).toMatch(/unclosed|parse error/i);
  });

  it('the unit tests catch an alert that would page on a single overrun', () => {
    const { tests } = mutated('one-overrun-pages', (s) => s.replace('min by (namespace, job) (min_over_time(cronsafe_overruns_total[1h]))\n          ) >= 3', 'min by (namespace, job) (min_over_time(cronsafe_overruns_total[1h]))\n          ) >= 1'), 'CronsafeRepeatedOverruns');
    const r = promtool('test', 'rules', tests);
    expect(r.code, r.out).not.toBe(0);
    expect(r.out).toContain('alertname: CronsafeRepeatedOverruns, time: 30m');
  });

  it('the unit tests catch an alert that merges one name\'s namespaces (staging\'s dead letters paged as the job alone)', () => {
    for (const [alert, expr] of [
      ['CronsafeDeadLetters', 'cronsafe_dead_letter_items) > 0'],
      ['CronsafeRunsFailing', 'cronsafe_consecutive_failed_runs) >= 3'],
    ] as const) {
      const { tests } = mutated(`merged-${alert}`, (s) => s.replace(`max by (namespace, job) (${expr}`, `max by (job) (${expr}`), alert);
      const r = promtool('test', 'rules', tests);
      expect(r.code, r.out).not.toBe(0);
      expect(r.out).toContain(`alertname: ${alert}, time: 30m`);
    }
  });

  it('the unit tests catch a no-success age that was changed', () => {
    const { tests } = mutated('age', (s) => s.replace('cronsafe:success_age_seconds > 86400', 'cronsafe:success_age_seconds > 172800'), 'CronsafeNoRecentSuccess');
    const r = promtool('test', 'rules', tests);
    expect(r.code, r.out).not.toBe(0);
    expect(r.out).toContain('alertname: CronsafeNoRecentSuccess');
  });
});

/** Every metric name cronsafe exposes, from the one module that declares them. */
function declaredMetrics(): string[] {
  const { registry } = createMetrics({ job: 'x', read: async () => undefined }, 'run');
  return registry.getMetricsAsArray().map((m) => m.name);
}

describe('dashboard and metric docs', () => {
  const dashboard = JSON.parse(readFileSync(path.join(ROOT, 'deploy/grafana/cronsafe-dashboard.json'), 'utf8')) as {
    templating: { list: Array<{ name: string; type: string; query: unknown }> };
    panels: Array<{ type: string; title: string; datasource?: { uid: string }; targets?: Array<{ expr: string }> }>;
  };
  const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));

  it('takes its data source as a variable and shows backlog, throughput, overruns, dead letters and run durations', () => {
    expect(dashboard.templating.list.find((v) => v.name === 'datasource')).toMatchObject({ type: 'datasource', query: 'prometheus' });
    for (const p of dashboard.panels.filter((x) => x.type !== 'row')) expect(p.datasource?.uid, p.title).toBe('${datasource}');
    const all = exprs.join('\n');
    for (const m of ['cronsafe_backlog_items', 'cronsafe_items_processed_total', 'cronsafe_overruns_total', 'cronsafe_dead_letter_items', 'cronsafe_run_duration_seconds']) {
      expect(all).toContain(m);
    }
  });

  it('queries only metrics cronsafe declares (or the rule file records)', () => {
    const known = new Set([...declaredMetrics(), 'cronsafe:success_age_seconds']);
    const used = new Set(exprs.flatMap((e) => e.match(/cronsafe[_:][a-z_:]+/g) ?? []).map((n) => n.replace(/_(bucket|sum|count)$/, '')));
    expect([...used].filter((n) => !known.has(n))).toEqual([]);
  });

  it('docs/metrics.md lists every declared metric', () => {
    const doc = readFileSync(path.join(ROOT, 'docs/metrics.md'), 'utf8');
    for (const name of declaredMetrics()) expect(doc, name).toContain(`\`${name}\``);
  });

  // A user greps Prometheus for the names the docs and the release notes give: one that no
  // module declares (cronsafe_items_fenced_total, for the fenced result of
  // cronsafe_items_processed_total) finds nothing, and an alert written on it never fires.
  it('README.md, docs/*.md, CHANGELOG.md and the chart name only metrics cronsafe declares', () => {
    const known = new Set([...declaredMetrics(), 'cronsafe:success_age_seconds']);
    const files = [
      'README.md',
      'CHANGELOG.md',
      ...readdirSync(path.join(ROOT, 'docs')).map((f) => `docs/${f}`),
      ...readdirSync(path.join(ROOT, 'helm/cronsafe'), { recursive: true, encoding: 'utf8' }).map((f) => `helm/cronsafe/${f}`),
    ].filter((f) => /\.(md|txt|yaml|tpl|json)$/.test(f));
    const unknown = files.flatMap((f) =>
      (readFileSync(path.join(ROOT, f), 'utf8').match(/\bcronsafe_[a-z_]+/g) ?? [])
        .map((n) => n.replace(/_(bucket|sum|count)$/, ''))
        .filter((n) => !known.has(n))
        .map((n) => `${f}: ${n}`),
    );
    expect([...new Set(unknown)]).toEqual([]);
  });

  // The runbook sends whoever is paged to the dashboard: its hourly counts must be the
  // alerts' counts. The series are those of cronsafe-rules.test.yaml's cases: runner pods
  // scraped alone (each sees one overrun; the job, three in the hour to 72m), and series
  // born with their total (a new job's only push, a pod one dead letter ahead of the last).
  it.skipIf(!PROMTOOL)('counts overruns, lock skips, missed occurrences and new dead letters per job, as the alerts do', () => {
    const query = (metric: string) => {
      const found = exprs.filter((e) => e.includes(metric) && /\[1h\]/.test(e));
      expect(found.length, metric).toBeGreaterThan(0);
      return found.map((e) => e.replaceAll('$job', '.*'));
    };
    const pods = (metric: string) => [
      { series: `${metric}{job="pods", instance="10.0.0.1:9464"}`, values: '0x4 1x5' },
      { series: `${metric}{job="pods", instance="10.0.0.2:9464"}`, values: '_x19 1x4 2x5' },
      { series: `${metric}{job="pods", instance="10.0.0.3:9464"}`, values: '_x39 2x4 3x5' },
      { series: `${metric}{job="pods", instance="10.0.0.4:9464"}`, values: '_x59 3x4 4x5' },
    ];
    const counters = ['cronsafe_overruns_total', 'cronsafe_lock_skips_total', 'cronsafe_missed_occurrences_total'];
    const dead = 'cronsafe_dead_lettered_total';
    const first = 'cronsafe_first_run_timestamp_seconds';
    const tests = {
      rule_files: [RULES],
      evaluation_interval: '1m',
      tests: [
        {
          name: 'dashboard: runner pods scraped alone',
          interval: '1m',
          input_series: counters.flatMap(pods),
          promql_expr_test: counters.flatMap((m) =>
            query(m).map((expr) => ({ expr, eval_time: '72m', exp_samples: [{ labels: '{job="pods"}', value: 3 }] })),
          ),
        },
        {
          name: 'dashboard: dead letters in a series\' first sample',
          interval: '1m',
          input_series: [
            { series: `${dead}{job="fresh", instance=""}`, values: '_x20 3x100' },
            { series: `${first}{job="fresh", instance=""}`, values: '_x20 1200x100' },
            { series: `${dead}{job="reborn", instance=""}`, values: '4x20 _x100 4x60' },
            { series: `${first}{job="reborn", instance=""}`, values: '0x20 _x100 0x60' },
            { series: `${dead}{job="pods", instance="10.0.0.1:9464"}`, values: '_x120 2x4' },
            { series: `${first}{job="pods", instance="10.0.0.1:9464"}`, values: '_x120 0x4' },
            { series: `${dead}{job="pods", instance="10.0.0.2:9464"}`, values: '_x140 3x4' },
            { series: `${first}{job="pods", instance="10.0.0.2:9464"}`, values: '_x140 0x4' },
          ],
          promql_expr_test: query(dead).flatMap((expr) => [
            // As CronsafeDeadLettersGrowing pages: "fresh" 3 new, "reborn" (first run within the hour) 4.
            { expr, eval_time: '25m', exp_samples: [{ labels: '{job="fresh"}', value: 3 }, { labels: '{job="reborn"}', value: 4 }] },
            // "pods": 3 after 2; the others' totals were seen before.
            { expr, eval_time: '150m', exp_samples: [{ labels: '{job="fresh"}', value: 0 }, { labels: '{job="pods"}', value: 1 }, { labels: '{job="reborn"}', value: 0 }] },
          ]),
        },
      ],
    };
    const file = path.join(mkdtempSync(path.join(scratch, 'dash-counts-')), 'dashboard.test.yaml');
    writeFileSync(file, YAML.stringify(tests));
    const r = promtool('test', 'rules', file);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('SUCCESS');
  });

  it.skipIf(!PROMTOOL)('every dashboard query is valid PromQL (promtool parses them as recording rules)', () => {
    const rules = exprs.map((e, i) => ({ record: `dashboard:q${i}`, expr: e.replaceAll('$__rate_interval', '5m').replaceAll('$job', '.*') }));
    const file = path.join(mkdtempSync(path.join(scratch, 'dash-')), 'dashboard-rules.yaml');
    writeFileSync(file, YAML.stringify({ groups: [{ name: 'dashboard', rules }] }));
    const r = promtool('check', 'rules', file);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain(`SUCCESS: ${exprs.length} rules found`);
  });
});
