import { beforeAll, describe, expect, it } from 'vitest';
import { configOf, ensureTools, mainContainer, render, runner, templateRaw, validateObject } from './helpers.js';

beforeAll(ensureTools);

describe('many pods on one PostgreSQL ledger', () => {
  it('default: one pod, SQLite, no database secret', () => {
    const objs = render();
    const job = (runner(objs).spec as { jobTemplate: { spec: Record<string, unknown> } }).jobTemplate.spec;
    expect(job.parallelism ?? 1).toBe(1);
    expect(JSON.stringify(mainContainer(runner(objs)).env ?? [])).not.toContain('CRONSAFE_STATE_POSTGRES');
    expect(configOf(objs).state).toHaveProperty('sqlite');
  });

  it('parallelism with the URL from an existing Secret (never in the ConfigMap)', () => {
    const objs = render({ parallelism: 3, completions: 3, config: { state: { postgres: { existingSecret: 'pg-url', schema: 'captions' } } } });
    for (const o of objs) validateObject(o);
    const job = (runner(objs).spec as { jobTemplate: { spec: Record<string, unknown> } }).jobTemplate.spec;
    expect(job).toMatchObject({ parallelism: 3, completions: 3 });
    const env = mainContainer(runner(objs)).env as Array<{ name: string; valueFrom?: unknown }>;
    expect(env.find((e) => e.name === 'CRONSAFE_STATE_POSTGRES')).toEqual({
      name: 'CRONSAFE_STATE_POSTGRES',
      valueFrom: { secretKeyRef: { name: 'pg-url', key: 'url' } },
    });
    const state = configOf(objs).state as Record<string, unknown>;
    expect(state.schema).toBe('captions');
    expect(JSON.stringify(configOf(objs))).not.toMatch(/postgres:\/\//);
  });

  it('the schema rejects parallelism below 1', () => {
    const r = templateRaw({ parallelism: 0 });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/parallelism/);
  });
});
