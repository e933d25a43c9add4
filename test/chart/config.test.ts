/**
 * The cronsafe.yaml the chart and the manifests render must be a config cronsafe
 * accepts: a config error in a pod is exit 78, which fails the Job at once. The rendered
 * file is validated with the real CLI after moving its absolute paths into a temp dir
 * (they point at the pod's volume, which does not exist here).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { ROOT, configOf, ensureTools, kubectl, mainContainer, parseDocs, podSpec, render, runner, tempDir, templateRaw, type Obj } from './helpers.js';
import { VALUE_SETS } from './value-sets.js';
import { docYamlBlocks, isChartValues } from '../helpers/doc-yaml.js';

const CLI = path.join(ROOT, 'dist/cli.js');

beforeAll(() => {
  ensureTools();
  if (!existsSync(CLI)) throw new Error(`${CLI} not found: run \`npm run build\` first (npm test does)`);
});

/** Every path key cronsafe resolves; each is re-rooted under `root`. */
function reroot(cfg: Obj, root: string): Obj {
  const out = structuredClone(cfg);
  const move = (p: unknown) => path.join(root, String(p));
  out.source.directory = move(out.source.directory);
  mkdirSync(out.source.directory, { recursive: true });
  if (out.output) out.output.directory = move(out.output.directory);
  if (out.state?.sqlite) out.state.sqlite = move(out.state.sqlite);
  if (out.lock?.path) out.lock.path = move(out.lock.path);
  // A script the command's interpreter is given (python3 /opt/qc.py) is in the image: one is
  // made where the re-rooted config looks for it, as the module below is.
  if (Array.isArray(out.handler.command)) {
    out.handler.command = (out.handler.command as string[]).map((arg, i) => {
      if (i === 0 || !arg.startsWith('/') || arg.includes('{')) return arg;
      const file = move(arg);
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, '');
      return file;
    });
  }
  if (out.handler.module) {
    out.handler.module = move(out.handler.module);
    mkdirSync(path.dirname(out.handler.module), { recursive: true });
    writeFileSync(out.handler.module, 'export default async () => {};\n');
  }
  return out;
}

function validate(cfg: Obj, extraEnv: Record<string, string> = {}): { status: number | null; stdout: string; stderr: string; summary?: Obj } {
  const dir = tempDir('cronsafe-chartcfg-');
  const file = path.join(dir, 'cronsafe.yaml');
  writeFileSync(file, YAML.stringify(reroot(cfg, dir)));
  const env = { ...process.env, ...extraEnv };
  delete env.CRONSAFE_STATE_POSTGRES; // would replace the rendered state
  const r = spawnSync(process.execPath, [CLI, 'validate', '-c', file], { encoding: 'utf8', env, timeout: 30_000 });
  const json = r.stdout.slice(r.stdout.indexOf('\n') + 1);
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, summary: r.status === 0 ? (JSON.parse(json) as Obj) : undefined };
}

describe('the chart renders a config that `cronsafe validate` accepts', () => {
  // The my-values.yaml examples of README.md, docs/ and the chart's README, as users copy them.
  it.each(docYamlBlocks().filter(isChartValues).map((b) => [b.where, b.doc]))('values of %s', (_where, values) => {
    const cfg = configOf(render(values));
    const r = validate(cfg);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(': OK');
  });

  it.each(Object.entries(VALUE_SETS))('%s', (_name, values) => {
    const cfg = configOf(render(values));
    const r = validate(cfg);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(': OK');
  });

  it('cronsafe sees the values the CronJob was rendered from', () => {
    const values = { drain: { gracePeriodSeconds: 240, marginSeconds: 20 }, schedule: '30 2 * * *', timeZone: 'Europe/Paris',
      config: { concurrency: 3, retry: { maxAttempts: 7 }, retention: { runs: 200, days: 7, forgetMissingAfterDays: 14 } } };
    const r = validate(configOf(render(values)));
    expect(r.status, r.stderr).toBe(0);
    expect(r.summary).toMatchObject({
      name: 'qc-cronsafe',
      drain: { gracePeriodSeconds: 240, marginSeconds: 20 },
      schedule: { cron: '30 2 * * *', timeZone: 'Europe/Paris' },
      concurrency: 3,
      retry: { maxAttempts: 7 },
      retention: { runs: 200, days: 7, forgetMissingAfterDays: 14 },
      handler: { command: ['cp', '{path}', '{output}'] },
    });
  });

  // A Job's pod spec is fixed when the Job is made, the ConfigMap is read when a pod starts:
  // a pod the Job starts after `helm upgrade` (a retry after exit 1, the replacement for a
  // drained pod) has the old terminationGracePeriodSeconds and the new cronsafe.yaml. Its
  // drain followed the new grace (600 s) while the kubelet SIGKILLed it at the old one (150 s).
  it('a pod its Job starts after an upgrade drains within its own grace period, not the new config\'s', () => {
    const before = runner(render({ drain: { gracePeriodSeconds: 150, marginSeconds: 15 } }));
    const after = configOf(render({ drain: { gracePeriodSeconds: 600, marginSeconds: 60 } }));
    const env = Object.fromEntries((mainContainer(before).env as Obj[]).filter((e) => 'value' in e).map((e) => [e.name as string, String(e.value)]));
    const r = validate(after, env);
    expect(r.status, r.stderr).toBe(0);
    expect(r.summary?.drain).toEqual({ gracePeriodSeconds: podSpec(before).terminationGracePeriodSeconds, marginSeconds: 15 });
  });

  // What NOTES.txt tells users whose Pushgateway needs a password: the ConfigMap holds the
  // reference only, cronsafe expands it from the pod's env (extraEnv from a Secret).
  it('a Pushgateway password referenced as ${VAR} stays out of the ConfigMap and reaches cronsafe from the env', () => {
    const objs = render({ metrics: { pushgateway: 'https://ops:${PUSHGATEWAY_PASSWORD}@pgw.example.com' } });
    expect(JSON.stringify(objs)).not.toContain('hunter2');
    const r = validate(configOf(objs), { PUSHGATEWAY_PASSWORD: 'hunter2' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.summary?.metrics).toMatchObject({ pushgateway: 'https://ops:***@pgw.example.com' });
    expect(r.stdout).not.toContain('hunter2');
  });

  it('schedule.repeatedFire reaches cronsafe: a CronJob user can skip the second fall-back fire (run by default, as Kubernetes does)', () => {
    const skip = validate(configOf(render({ schedule: '30 1 * * *', timeZone: 'America/New_York', config: { schedule: { repeatedFire: 'skip' } } })));
    expect(skip.status, skip.stderr).toBe(0);
    expect(skip.summary).toMatchObject({ schedule: { cron: '30 1 * * *', repeatedFire: 'skip' } });
    expect(configOf(render({})).schedule.repeatedFire).toBe('run');
  });

  it('handler.expectOutput reaches cronsafe (and is left out, so the default applies, when false)', () => {
    const on = validate(configOf(render({ config: { handler: { expectOutput: true } } })));
    expect(on.status, on.stderr).toBe(0);
    expect(on.summary).toMatchObject({ handler: { expectOutput: true } });
    const off = configOf(render({}));
    expect(off.handler.expectOutput).toBeUndefined();
  });

  it('the Kubernetes features render keys cronsafe knows: Lease name, Events, scheduled timestamp', () => {
    const r = validate(configOf(render({
      lock: { kubernetesLease: { enabled: true, name: 'captions-lock' } }, events: { enabled: true }, scheduledTimestamp: { enabled: true },
    })));
    expect(r.status, r.stderr).toBe(0);
    expect(r.summary).toMatchObject({
      lock: { kubernetesLease: { name: 'captions-lock', durationSeconds: 90, renewSeconds: 30 } },
      events: { enabled: true },
      scheduledTimestamp: { enabled: true },
    });
  });

  it('puts every relative path on the volume', () => {
    const cfg = configOf(render({ persistence: { mountPath: '/srv/work' } }));
    expect(cfg.source.directory).toBe('/srv/work/queue');
    expect(cfg.output.directory).toBe('/srv/work/out');
    expect(cfg.state.sqlite).toBe('/srv/work/state/cronsafe.db');
  });

  it('the run lock is on the pod\'s /tmp emptyDir, whatever the volume; an explicit path wins', () => {
    for (const values of [{}, { persistence: { accessModes: ['ReadWriteMany'] } }, { persistence: { existingClaim: 'mine' } }]) {
      const objs = render(values);
      const cfg = configOf(objs);
      expect(cfg.lock.path, JSON.stringify(values)).toBe('/tmp/qc-cronsafe.lock');
      const tmp = (mainContainer(runner(objs)).volumeMounts as Obj[]).find((m) => m.mountPath === '/tmp') as Obj;
      const volume = (podSpec(runner(objs)).volumes as Obj[]).find((v) => v.name === tmp.name) as Obj;
      expect(volume.emptyDir).toBeDefined();
      expect(validate(cfg).status).toBe(0);
    }
    expect(configOf(render({ config: { lock: { path: 'locks/x.lock' } } })).lock.path).toBe('/data/locks/x.lock');
  });

  it('the network file system opt-ins reach cronsafe (and are left out when false)', () => {
    const on = validate(configOf(render({ config: { state: { allowNetworkFilesystem: true }, lock: { allowNetworkFilesystem: true } } })));
    expect(on.status, on.stderr).toBe(0);
    expect(on.summary).toMatchObject({ state: { allowNetworkFilesystem: true }, lock: { allowNetworkFilesystem: true } });
    const off = configOf(render({}));
    expect(off.state.allowNetworkFilesystem).toBeUndefined();
    expect(off.lock.allowNetworkFilesystem).toBeUndefined();
  });

  it('the edge ledger/lock paths and globs the chart schema accepts, cronsafe accepts too (those it refuses, the schema refuses: schema.test.ts)', () => {
    const r = validate(configOf(render({
      config: {
        state: { sqlite: './state//.db' },
        lock: { path: 'locks/./..x' },
        source: { include: ['a\\\\', './**', '././x'], exclude: ['!(*.csv)', 'x/..y', 'b'.repeat(65_536)] },
      },
    })));
    expect(r.status, r.stderr).toBe(0);
  });

  it('source globs: the chart schema refuses what cronsafe refuses (exit 78 in every Job), and takes what it takes', () => {
    // Before, the chart took the first four: installed, every Job then failed with exit 78.
    const globs = ['tmp/', 'tmp\\', '!bad.txt', '!', '!(*.tmp)', 'a/!b', '[!.]*', 'back\\\\', 'x\\*', 'a//b', 'x/.', 'a/./b', '.', './.', './x', 'photo (1).jpg'];
    const base = configOf(render({}));
    for (const g of globs) {
      const values = { config: { source: { exclude: [g] } } };
      const chart = templateRaw(values);
      const cfg = chart.status === 0 ? configOf(render(values)) : { ...base, source: { ...base.source, exclude: [g] } };
      const cronsafe = validate(cfg);
      expect({ glob: g, chartTakesIt: chart.status === 0 }, cronsafe.stderr).toEqual({ glob: g, chartTakesIt: cronsafe.status === 0 });
      if (cronsafe.status !== 0) expect(cronsafe.status, g).toBe(78);
    }
  });

  it('a schedule field out of range is refused by the chart (the API server would refuse the CronJob) and by validate (exit 78)', () => {
    const chart = templateRaw({ schedule: '61 * * * *' });
    expect(chart.status).not.toBe(0);
    expect(chart.stderr).toContain('schedule "61 * * * *": the minute field\'s "61" has a value outside 0-59');
    const cfg = configOf(render());
    const r = validate({ ...cfg, schedule: { ...cfg.schedule, cron: '61 * * * *' } });
    expect(r.status).toBe(78);
    expect(r.stderr).toContain('schedule.cron');
  });
});

describe('the kustomize manifests carry a config `cronsafe validate` accepts', () => {
  it.each(['k8s/base', 'k8s/overlays/example'])('%s', (dir) => {
    const r = kubectl(['kustomize', path.join(ROOT, dir)]);
    expect(r.status, r.stderr).toBe(0);
    const cm = parseDocs(r.stdout).find((o) => o.kind === 'ConfigMap') as Obj;
    const v = validate(YAML.parse(cm.data['cronsafe.yaml'] as string) as Obj);
    expect(v.status, v.stderr).toBe(0);
  });
});
