import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { ROOT, configOf, ensureTools, mainContainer, render, runner, tempDir, templateRaw, validateObject } from './helpers.js';

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

  // values.yaml and docs/kubernetes.md offer extraEnv (or extraEnvFrom) for the URL too. The
  // schema was rendered only with existingSecret, so such a job used cronsafe's default
  // schema: a second job on the database then found it owned by the first (exit 78 in
  // every Job), though each had been given its own config.state.postgres.schema.
  it.each([
    ['extraEnv', { extraEnv: [{ name: 'CRONSAFE_STATE_POSTGRES', valueFrom: { secretKeyRef: { name: 'pg', key: 'url' } } }] }],
    ['extraEnvFrom', { extraEnvFrom: [{ secretRef: { name: 'pg-env' } }] }],
  ])('config.state.postgres.schema reaches cronsafe when the URL comes from %s', (_from, values) => {
    const cfg = configOf(render({ ...values, config: { state: { postgres: { schema: 'captions_b' } } } }));
    expect((cfg.state as Record<string, unknown>).schema).toBe('captions_b');
    // What the pod's cronsafe makes of it, with the URL in its env as the Secret puts it.
    const dir = tempDir('cronsafe-chartpg-');
    mkdirSync(path.join(dir, 'queue'));
    const file = path.join(dir, 'cronsafe.yaml');
    writeFileSync(file, YAML.stringify({ ...cfg, source: { ...cfg.source, directory: path.join(dir, 'queue') }, output: { directory: path.join(dir, 'out') } }));
    const r = spawnSync(process.execPath, [path.join(ROOT, 'dist/cli.js'), 'validate', '-c', file], {
      encoding: 'utf8',
      env: { ...process.env, CRONSAFE_STATE_POSTGRES: 'postgres://cronsafe:secret@db.example.com/jobs' },
      timeout: 30_000,
    });
    expect(r.status, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout.slice(r.stdout.indexOf('\n') + 1)) as { state: Record<string, unknown> };
    expect(summary.state.schema).toBe('captions_b');
  });

  it('the schema rejects parallelism below 1', () => {
    const r = templateRaw({ parallelism: 0 });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/parallelism/);
  });
});
