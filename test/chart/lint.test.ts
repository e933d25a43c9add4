import { beforeAll, describe, expect, it } from 'vitest';
import { CHART, ensureTools, helm, valuesFile } from './helpers.js';
import { VALUE_SETS } from './value-sets.js';

beforeAll(ensureTools);

describe('helm lint', () => {
  it('passes with the default values, and --strict fails on warnings too', () => {
    const plain = helm(['lint', CHART]);
    expect(plain.status, plain.stdout + plain.stderr).toBe(0);
    const strict = helm(['lint', '--strict', CHART]);
    expect(strict.status, strict.stdout + strict.stderr).toBe(0);
    expect(strict.stdout).toContain('0 chart(s) failed');
    expect(strict.stdout).not.toMatch(/\[(WARNING|ERROR)\]/);
  });

  it.each(Object.entries(VALUE_SETS))('passes --strict with the %s value set', (_name, values) => {
    const r = helm(['lint', '--strict', CHART, '-f', valuesFile(values)]);
    expect(r.status, r.stdout + r.stderr).toBe(0);
  });

  it('fails on a value the schema rejects (so CI lint catches it before install)', () => {
    const r = helm(['lint', '--strict', CHART, '-f', valuesFile({ concurrencyPolicy: 'Allow' })]);
    expect(r.status).not.toBe(0);
    expect(r.stdout + r.stderr).toContain('/concurrencyPolicy');
  });
});

describe('kubeVersion', () => {
  it('refuses clusters older than 1.27 (spec.timeZone, podFailurePolicy)', () => {
    const old = helm(['template', 'qc', CHART, '--kube-version', '1.26.9']);
    expect(old.status).not.toBe(0);
    expect(old.stderr).toContain('>=1.27.0-0');
    expect(helm(['template', 'qc', CHART, '--kube-version', '1.27.0']).status).toBe(0);
  });
});
