/**
 * CronsafeRepeatedOverruns pages on three overruns within its window. A run that outlasts the
 * interval between fires sees about one fire come due (an overrun) per two fires, so at the
 * rules file's one hour a job firing every 15 minutes or less often whose every run overran
 * never paged: an hourly job overruns once every two hours. The chart fits the window to
 * `schedule` (6 x the interval, 1h to 7d).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { PROMTOOL, PROMTOOL_TIMEOUT_MS, promtool } from '../helpers/prom.js';
import { CHART, ensureTools, render, type Obj } from './helpers.js';

const ALERT = 'CronsafeRepeatedOverruns';
const scratch = mkdtempSync(path.join(tmpdir(), 'cronsafe-overrun-window-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
beforeAll(() => ensureTools());

const ruleOf = (schedule: string): { spec: Obj; overruns: Obj } => {
  const spec = render({ schedule, metrics: { pushgateway: 'http://pushgateway.monitoring:9091', prometheusRule: { enabled: true } } }).find((o) => o.kind === 'PrometheusRule')!.spec as Obj;
  const overruns = (spec.groups as Obj[]).flatMap((g) => g.rules as Obj[]).find((r) => r.alert === ALERT)!;
  return { spec, overruns };
};

describe('the overrun alert window follows the schedule', () => {
  it.each([
    ['*/5 * * * *', '1h'],
    ['*/10 * * * *', '1h'],
    ['*/15 * * * *', '90m'],
    ['*/20 * * * *', '2h'],
    ['0 * * * *', '6h'],
    ['@hourly', '6h'],
    ['5 */4 * * *', '1d'],
    ['30 2 * * *', '6d'],
    ['@daily', '6d'],
    ['0 3 * * 0', '7d'],
    // Lists, ranges and steps: a day over the fires in it (they kept 1h, so a job every 30
    // minutes or every 2 hours whose every run overran never paged).
    ['0,30 * * * *', '3h'],
    ['15,45 * * * *', '3h'],
    ['5/15 * * * *', '90m'],
    ['0 0-23/2 * * *', '12h'],
    ['0 1-23/2 * * *', '12h'],
    ['0 2/6 * * *', '36h'],
    ['0 9-17 * * *', '16h'],
    ['0 0,12 * * *', '3d'],
    // Restricted days: the interval on the days that have fires (they kept 1h, so an hourly
    // weekday job whose every run overran never paged).
    ['0 * * * 1-5', '6h'],
    ['0 * * * mon-fri', '6h'],
    ['*/15 * * * 1-5', '90m'],
    ['0 */4 * 1-6 *', '1d'],
    ['0 9-17 * * 1-5', '16h'],
    ['*/5 9-17 * * 1-5', '80m'],
    ['0 0,12 * * 0', '3d'],
    ['0 1 * * mon-fri', '6d'],
    ['0 3 1 * *', '7d'],
    ['*-5 * * * *', '1h'], // an interval the chart does not work out (robfig reads `*-5` as `*`): the file's hour
    ['0,,30 * * * *', '1h'],
  ])('%s: %s', (schedule, window) => {
    const { overruns } = ruleOf(schedule);
    const expr = overruns.expr as string;
    expect(expr.match(/cronsafe_overruns_total\[[^\]]+\]/g)?.every((m) => m === `cronsafe_overruns_total[${window}]`)).toBe(true);
    expect(expr).toContain(`cronsafe_overruns_total[${window}] offset ${window}`);
    // The reset branch's test of a new ledger follows the window too (nothing of the hour left).
    if (window !== '1h') expect(expr).not.toMatch(/\[1h\]|3600/);
    expect(overruns.annotations.summary).toContain(window === '1h' ? 'overruns in the last hour' : `overruns in the last ${window}`);
  });

  it('metrics.prometheusRule.overrunWindow sets it for jobs on other schedules; the schema refuses what PromQL would', () => {
    const spec = render({ schedule: '0 * * * *', metrics: { pushgateway: 'http://pushgateway.monitoring:9091', prometheusRule: { enabled: true, overrunWindow: '3h' } } }).find((o) => o.kind === 'PrometheusRule')!.spec as Obj;
    const expr = (spec.groups as Obj[]).flatMap((g) => g.rules as Obj[]).find((r) => r.alert === ALERT)!.expr as string;
    expect(expr).toContain('cronsafe_overruns_total[3h] offset 3h');
    expect(() => render({ metrics: { prometheusRule: { enabled: true, overrunWindow: '3 hours' } } })).toThrow(/overrunWindow/);
  });

  it('leaves the other alerts as the file has them', () => {
    const { spec } = ruleOf('0 * * * *');
    const dead = (spec.groups as Obj[]).flatMap((g) => g.rules as Obj[]).find((r) => r.alert === 'CronsafeDeadLettersGrowing')!;
    expect(dead.expr).toContain('cronsafe_dead_lettered_total[1h]');
  });
});

describe.skipIf(!PROMTOOL)('the rendered rules parse (promtool check rules)', { timeout: PROMTOOL_TIMEOUT_MS + 10_000 }, () => {
  it.each(['0,30 * * * *', '0 0-23/2 * * *', '*/7 * * * *', '*/45 * * * *', '0 */1 * * *', '0 9-17 * * *', '@weekly'])('%s', (schedule) => {
    const file = path.join(scratch, `check-${schedule.replace(/[^0-9a-z]+/gi, '_')}.yaml`);
    writeFileSync(file, YAML.stringify({ groups: ruleOf(schedule).spec.groups }));
    const r = promtool('check', 'rules', file);
    expect(r.code, r.out).toBe(0);
  });
});

describe.skipIf(!PROMTOOL)('an hourly job whose every run overruns (promtool test rules)', { timeout: PROMTOOL_TIMEOUT_MS + 10_000 }, () => {
  // Runs of 90 minutes, one fire overrun per run, a run every two hours: the total rises at
  // 70m, 190m, 310m and 430m.
  const series = "cronsafe_overruns_total{job=\"hourly\", instance=\"\", namespace=\"batch\"}";
  const values = '0x69 1x119 2x119 3x119 4x100';
  const ruleFile = (name: string, groups: unknown): string => {
    const file = path.join(scratch, `${name}.yaml`);
    writeFileSync(file, YAML.stringify({ groups }));
    return file;
  };
  const testFile = (name: string, rules: string, fires: boolean): string => {
    const file = path.join(scratch, `${name}.test.yaml`);
    const at = (m: number, exp: unknown[]) => ({ eval_time: `${m}m`, alertname: ALERT, exp_alerts: exp });
    const ann = ruleOf('0 * * * *').overruns.annotations as Record<string, string>;
    const exp_annotations = {
      summary: 'cronsafe job hourly: 3 overruns in the last 6h',
      description: ann.description!.replace('{{ $labels.job }}', 'hourly'),
      runbook_url: ann.runbook_url,
    };
    const page = [{ exp_labels: { namespace: 'batch', job: 'hourly', severity: 'page' }, exp_annotations }];
    writeFileSync(
      file,
      YAML.stringify({
        rule_files: [path.basename(rules)],
        evaluation_interval: '1m',
        tests: [{ interval: '1m', input_series: [{ series, values }], alert_rule_test: [at(200, []), at(320, fires ? page : [])] }],
      }),
    );
    return file;
  };

  it("pages with the chart's rule for an hourly schedule, from the third overrun", () => {
    const rules = ruleFile('hourly', ruleOf('0 * * * *').spec.groups);
    const r = promtool('test', 'rules', testFile('hourly', rules, true));
    expect(r.code, r.out).toBe(0);
  });

  it("never pages with the file's one-hour window (what the chart rendered before)", () => {
    const rules = ruleFile('file', (YAML.parse(readFileSync(path.join(CHART, 'files/cronsafe-rules.yaml'), 'utf8')) as Obj).groups);
    const r = promtool('test', 'rules', testFile('file', rules, false));
    expect(r.code, r.out).toBe(0);
  });
});

describe.skipIf(!PROMTOOL)('the reset branch over a daily window (promtool test rules)', { timeout: PROMTOOL_TIMEOUT_MS + 10_000 }, () => {
  // Over the 6d of a daily job the file's test of a new ledger ("first run within the hour")
  // missed a ledger made anew more than an hour before whose series was born with overruns
  // (a pod scraped once, a push that came late), and widened as it was ("first run within 6d")
  // it took a ledger younger than 6d restored from a copy for a new one, and increase() counted
  // the copy's total as new overruns. The chart tests whether the first run changed in the window.
  const run = (name: string, series: [string, string, string][], exp: unknown[]): ReturnType<typeof promtool> => {
    const rules = path.join(scratch, `${name}.yaml`);
    writeFileSync(rules, YAML.stringify({ groups: ruleOf('@daily').spec.groups }));
    const input_series = series.flatMap(([job, overruns, firstRun]) => [
      { series: `cronsafe_overruns_total{job="${job}", instance=""}`, values: overruns },
      { series: `cronsafe_first_run_timestamp_seconds{job="${job}", instance=""}`, values: firstRun },
    ]);
    const file = path.join(scratch, `${name}.test.yaml`);
    writeFileSync(file, YAML.stringify({
      rule_files: [path.basename(rules)],
      evaluation_interval: '1h',
      tests: [{ interval: '1h', input_series, alert_rule_test: [{ eval_time: '105h', alertname: ALERT, exp_alerts: exp }] }],
    }));
    return promtool('test', 'rules', file);
  };
  const ann = ruleOf('@daily').overruns.annotations as Record<string, string>;

  it('pages for a ledger made anew two days ago, its series born with an overrun, at its third', () => {
    // The old ledger at 10 (first run 10 days before), a new one from 48h (first run then): 1, 2, 3.
    const r = run('anew', [['daily', '10x47 1x24 2x24 3x10', '-864000x47 172800x60']], [{
      exp_labels: { job: 'daily', severity: 'page' },
      exp_annotations: {
        // increase() extrapolates half an interval past the series' first sample in the window.
        summary: 'cronsafe job daily: 3.014 overruns in the last 6d',
        description: ann.description!.replace('{{ $labels.job }}', 'daily'),
        runbook_url: ann.runbook_url,
      },
    }]);
    expect(r.code, r.out).toBe(0);
  });

  it('does not page for a ledger four days old restored from a copy (2 overruns, back to 1)', () => {
    const r = run('restored', [['young', '0x40 1x40 2x20 1x20', '0x125']], []);
    expect(r.code, r.out).toBe(0);
  });
});
