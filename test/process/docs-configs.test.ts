/**
 * Every config a user copies from this project must pass `cronsafe validate`: the YAML
 * blocks of README.md and docs/*.md (a whole config, or a part of one merged into the
 * example of docs/configuration.md), the plain manifests' cronsafe.yaml (k8s/) and the
 * config `npm run demo` (examples/demo) writes and runs. The config checks grow stricter
 * (globs, paths, YAML tags); an example they refuse is a user's first run failing with
 * exit 78. Only the machine's paths are changed (/data, /app, /opt and the lock on /tmp
 * go under a temp directory), as a user adapts them.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { ROOT, runCli } from '../helpers/cli.js';
import { CONFIG_KEYS, docYamlBlocks, isChartValues, type Obj } from '../helpers/doc-yaml.js';

const parsed = docYamlBlocks();
const whole = parsed.filter((b) => 'name' in b.doc && 'source' in b.doc && 'handler' in b.doc);
const parts = parsed.filter((b) => !whole.includes(b) && Object.keys(b.doc).every((k) => CONFIG_KEYS.has(k)));
const base = whole.find((b) => b.where.startsWith('docs/configuration.md'))!;

function merge(into: Obj, from: Obj): Obj {
  for (const [k, v] of Object.entries(from)) {
    const cur = into[k];
    if (v && typeof v === 'object' && !Array.isArray(v) && cur && typeof cur === 'object' && !Array.isArray(cur)) merge(cur as Obj, v as Obj);
    else into[k] = v;
  }
  return into;
}

/** A temp root with the directories and programs the examples name. */
function machine() {
  const root = mkdtempSync(path.join(tmpdir(), 'cronsafe-docs-'));
  for (const d of ['data/queue', 'data/out', 'data/state', 'app', 'opt/qc', 'bin']) mkdirSync(path.join(root, d), { recursive: true });
  for (const f of ['app/qc.py', 'opt/qc/qc.py']) writeFileSync(path.join(root, f), '');
  // The examples' handler program, wherever this test runs.
  writeFileSync(path.join(root, 'bin/python3'), '#!/bin/sh\nexit 0\n');
  chmodSync(path.join(root, 'bin/python3'), 0o755);
  // CRONSAFE_STATE_POSTGRES empty is unset: this shell's own would replace the examples' state.
  const env = { PATH: `${path.join(root, 'bin')}:${process.env.PATH ?? ''}`, CRONSAFE_STATE_POSTGRES: '' };
  /** The config text with its absolute paths under root. */
  const local = (text: string) => text
    .replace(/(["'\s])\/(data|app|opt)\//g, `$1${root}/$2/`)
    .replace(/(["'\s])\/tmp\/([\w.-]+\.lock)/g, `$1${root}/$2`);
  const write = (name: string, text: string) => {
    const file = path.join(root, name);
    writeFileSync(file, local(text));
    return file;
  };
  return { root, env, write };
}

async function validate(file: string, env: NodeJS.ProcessEnv) {
  const r = await runCli(['validate', '-c', file], { env });
  return { code: r.code, out: `${r.stdout}${r.stderr}` };
}

describe("the configs users copy from this project's docs and examples", () => {
  it("every YAML block of the docs is a config, a part of one, the chart's values (test/chart/config.test.ts) or Prometheus'", () => {
    expect(base, 'the example of docs/configuration.md').toBeDefined();
    expect(whole.length).toBeGreaterThanOrEqual(2);
    const unknown = parsed.filter((b) => !whole.includes(b) && !parts.includes(b) && !isChartValues(b) && !('scrape_configs' in b.doc));
    expect(unknown.map((b) => b.where)).toEqual([]);
  });

  it.each(whole.map((b) => [b.where, b.text]))('%s validates, and with CRONSAFE_STATE_POSTGRES set', async (_where, text) => {
    const m = machine();
    const file = m.write('cronsafe.yaml', text);
    const r = await validate(file, m.env);
    expect(r.out).toMatch(/: OK/);
    expect(r.code).toBe(0);
    // The documented way to put the ledger on PostgreSQL with the file unchanged.
    const pg = await validate(file, { ...m.env, CRONSAFE_STATE_POSTGRES: 'postgres://cronsafe@127.0.0.1:1/jobs' });
    expect(pg.out).toMatch(/: OK/);
    expect(pg.code).toBe(0);
  });

  it.each(parts.map((b) => [b.where, b.text]))('%s validates in the example of docs/configuration.md', async (_where, text) => {
    const m = machine();
    const doc = merge(YAML.parse(base.text) as Obj, YAML.parse(text) as Obj);
    // A part that puts the ledger on PostgreSQL replaces the example's SQLite file.
    if (typeof (YAML.parse(text) as Obj).state === 'object' && 'postgres' in ((YAML.parse(text) as Obj).state as Obj)) delete (doc.state as Obj).sqlite;
    const file = m.write('cronsafe.yaml', YAML.stringify(doc));
    // The variables docs/configuration.md's interpolation example reads.
    const r = await validate(file, { ...m.env, PGURL: 'postgres://cronsafe@127.0.0.1:1/jobs', API_TOKEN: '0123' });
    expect(r.out).toMatch(/: OK/);
    expect(r.code).toBe(0);
  });

  it.each(['k8s/base/cronsafe.yaml', 'k8s/overlays/example/cronsafe.yaml'])('%s validates', async (rel) => {
    const m = machine();
    const file = m.write('cronsafe.yaml', readFileSync(path.join(ROOT, rel), 'utf8'));
    const r = await validate(file, m.env);
    expect(r.out).toMatch(/: OK/);
    expect(r.code).toBe(0);
  });

  it('examples/demo (npm run demo) validates its config and runs it, exit 0', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-demo-'));
    const r = spawnSync(process.execPath, [path.join(ROOT, 'examples/demo/run-demo.mjs')], {
      env: { ...process.env, CRONSAFE_STATE_POSTGRES: '', DEMO_DIR: dir, DEMO_ITEMS: '3', DEMO_LOG_LEVEL: 'silent' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.stderr).not.toMatch(/config error/);
    expect(r.status).toBe(0);
    const config = path.join(dir, 'cronsafe.yaml');
    expect(existsSync(config)).toBe(true);
    const v = await validate(config, { CRONSAFE_STATE_POSTGRES: '' });
    expect(v.out).toMatch(/: OK/);
    expect(v.code).toBe(0);
    expect(readdirSync(path.join(dir, 'out')).length).toBeGreaterThan(0);
  });
});
