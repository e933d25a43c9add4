/**
 * The chart's PrometheusRule embeds helm/cronsafe/files/cronsafe-rules.yaml, a copy of
 * deploy/prometheus/cronsafe-rules.yaml (a chart can only read files inside itself).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CHART, ROOT } from './helpers.js';

const CHART_RULES = path.join(CHART, 'files/cronsafe-rules.yaml');
const DEPLOY_RULES = path.join(ROOT, 'deploy/prometheus/cronsafe-rules.yaml');
const promtool = spawnSync('promtool', ['--version']).status === 0;

describe('alert rules', () => {
  it.skipIf(!existsSync(DEPLOY_RULES))(
    `the chart's copy is identical to deploy/prometheus/cronsafe-rules.yaml${existsSync(DEPLOY_RULES) ? '' : ' (skipped: that file does not exist yet)'}`,
    () => {
      // On a mismatch: cp deploy/prometheus/cronsafe-rules.yaml helm/cronsafe/files/
      expect(readFileSync(CHART_RULES, 'utf8')).toBe(readFileSync(DEPLOY_RULES, 'utf8'));
    },
  );

  it.skipIf(!promtool)(`the chart's copy passes promtool check rules${promtool ? '' : ' (skipped: promtool not installed)'}`, () => {
    const r = spawnSync('promtool', ['check', 'rules', CHART_RULES], { encoding: 'utf8', timeout: 30_000 });
    expect(r.status, r.stdout + r.stderr).toBe(0);
  });

  it('holds the no-success expression the chart replaces with metrics.prometheusRule.noSuccessAgeSeconds', () => {
    expect(readFileSync(CHART_RULES, 'utf8')).toContain('expr: cronsafe:success_age_seconds > 86400\n');
  });

  it("holds the overrun alert's test of a new ledger (its first run changed within the window), whose [1h] the chart widens", () => {
    expect(readFileSync(CHART_RULES, 'utf8')).toContain(
      'unless on (namespace, job) (min by (namespace, job) (min_over_time(cronsafe_first_run_timestamp_seconds[1h])) == max by (namespace, job) (max_over_time(cronsafe_first_run_timestamp_seconds[1h])))',
    );
  });

  it('alerts on the metric names DESIGN.md fixes', () => {
    const text = readFileSync(CHART_RULES, 'utf8');
    expect(text).toContain('cronsafe_overruns_total');
    expect(text).toContain('cronsafe_dead_letter_items');
  });
});
