/**
 * What the release publishes, built here the way the release workflow builds it:
 *  - `npm pack --json` in a copy of the working tree without dist/: the `prepack` script
 *    builds dist/, and the package holds the bin, its chunks (with the licences of the
 *    packages bundled into them), README, LICENSE and package.json, and nothing else (no tests, .tmp, bench, sources, source maps); the
 *    unpacked package then runs (`cronsafe validate` and a `run`).
 *  - `helm package`: the chart's appVersion is package.json's version.
 *
 * The copy keeps `npm pack`'s build away from the dist/ that other tests run.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { CHART, ROOT, ensureTools, helm } from '../chart/helpers.js';

const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string; bin: { cronsafe: string } };
/** The licences of the packages bundled into the chunks (scripts/bundle.mjs). */
const LICENSES = 'dist/chunks/THIRD-PARTY-LICENSES.txt';

interface PackFile { path: string }
let packed: { files: PackFile[]; filename: string };
let packDir: string;

/** The working tree as a fresh clone would have it (tracked + new files, nothing ignored). */
function copyTree(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-pack-'));
  const listed = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' });
  for (const rel of listed.split('\0').filter(Boolean)) {
    if (!existsSync(path.join(ROOT, rel))) continue; // deleted, not yet committed
    mkdirSync(path.join(dir, path.dirname(rel)), { recursive: true });
    cpSync(path.join(ROOT, rel), path.join(dir, rel));
  }
  // Local state that must never be published, whatever the ignore files say.
  mkdirSync(path.join(dir, '.tmp'), { recursive: true });
  writeFileSync(path.join(dir, '.tmp/secret.txt'), 'x');
  writeFileSync(path.join(dir, 'bench/results-local.json'), '{}');
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  return dir;
}

beforeAll(() => {
  packDir = copyTree();
  expect(existsSync(path.join(packDir, 'dist'))).toBe(false);
  const out = mkdtempSync(path.join(tmpdir(), 'cronsafe-packed-'));
  // prepack's build prints to stderr; stdout is the JSON listing.
  const r = spawnSync('npm', ['pack', '--json', '--pack-destination', out], { cwd: packDir, encoding: 'utf8', timeout: 600_000, maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`npm pack failed (${r.status}):\n${r.stderr.slice(-4000)}`);
  const listing = (JSON.parse(r.stdout) as { files: PackFile[]; filename: string }[])[0];
  if (!listing) throw new Error('npm pack printed no package');
  packed = { ...listing, filename: path.join(out, listing.filename) };
}, 600_000);

describe('npm package', () => {
  it('ships the bin built by prepack, README, LICENSE and package.json', () => {
    const paths = packed.files.map((f) => f.path);
    expect(paths).toEqual(expect.arrayContaining(['package.json', 'README.md', 'LICENSE', pkg.bin.cronsafe]));
    expect(paths.filter((p) => p.startsWith('dist/chunks/')).length).toBeGreaterThan(0);
    // npm makes the bin executable when it links it on install; its shebang runs node (through
    // /bin/sh, which execs it with the bin's flags: unit/node-flags.test.ts).
    expect(readFileSync(path.join(packDir, pkg.bin.cronsafe), 'utf8')).toMatch(/^#!\/bin\/sh\n":" \/\/; exec node .*"\$0" "\$@"\n/);
  });

  it('ships nothing else: no tests, .tmp, bench, sources, source maps or CI files', () => {
    const unexpected = packed.files.map((f) => f.path).filter((p) =>
      !['package.json', 'README.md', 'LICENSE', 'dist/cli.js', 'dist/cli.cjs', 'dist/chunks/cronsafe.cjs', LICENSES].includes(p) && !/^dist\/chunks\/[^/]+\.(js|cache)$/.test(p));
    expect(unexpected).toEqual([]);
  });

  it('ships the licence of every package whose code is bundled into its chunks', () => {
    // The Kubernetes client and its dependencies are devDependencies, bundled: no package of
    // theirs comes with the npm package (or into the image's node_modules), so their MIT, ISC
    // and Apache-2.0 licences, which ask to go with every copy, went nowhere.
    expect(packed.files.map((f) => f.path)).toContain(LICENSES);
    const text = readFileSync(path.join(packDir, LICENSES), 'utf8');
    // What the chunks hold, from their source maps (built by prepack, left out of the package).
    const dirs = new Set<string>();
    for (const map of readdirSync(path.join(packDir, 'dist/chunks')).filter((f) => f.endsWith('.map'))) {
      for (const source of (JSON.parse(readFileSync(path.join(packDir, 'dist/chunks', map), 'utf8')) as { sources: string[] }).sources) {
        // The innermost node_modules: a package's own nested copy of a dependency is its own.
        const m = /^(.*\/node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(path.resolve(packDir, 'dist/chunks', source));
        if (m?.[1]) dirs.add(m[1]);
      }
    }
    const bundled = [...dirs].map((dir) => ({ dir, ...(JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name: string; version: string }) }));
    expect(bundled.map((p) => p.name)).toContain('@kubernetes/client-node');
    const missing = bundled.flatMap(({ dir, ...meta }) => {
      const licence = readdirSync(dir).find((f) => /^licen[cs]e/i.test(f));
      // Its first line stands for the text: a name listed without its licence is no notice.
      const first = licence === undefined ? '' : (readFileSync(path.join(dir, licence), 'utf8').trim().split('\n')[0] ?? '');
      const at = text.indexOf(`\n${meta.name}@${meta.version} (`);
      const end = text.indexOf(`\n${'='.repeat(72)}\n`, at + 1);
      const section = at < 0 ? '' : text.slice(at, end < 0 ? undefined : end);
      return section.includes(first) ? [] : [`${meta.name}@${meta.version}`];
    });
    expect(missing).toEqual([]);
  });

  it('bundles the Kubernetes client instead of depending on it: its own range pulls undici 8, which needs Node 22', () => {
    const shipped = JSON.parse(readFileSync(path.join(packDir, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; engines: { node: string } };
    expect(shipped.engines.node).toBe('>=20');
    expect(Object.keys(shipped.dependencies)).not.toContain('@kubernetes/client-node');
    expect(Object.keys(shipped.dependencies)).not.toContain('undici');
    const chunks = packed.files.map((f) => f.path).filter((p) => p.startsWith('dist/chunks/'));
    const withClient = chunks.filter((p) => {
      const text = readFileSync(path.join(packDir, p), 'utf8');
      return text.includes('CoordinationV1Api') && text.includes('UND_ERR_'); // the client and its undici
    });
    expect(withClient).toHaveLength(1);
    // Loaded lazily: the bin itself never imports it.
    expect(readFileSync(path.join(packDir, 'dist/cli.js'), 'utf8')).not.toContain('CoordinationV1Api');
  });

  it('`cronsafe --version` is package.json\'s version, wherever it is run from (not the caller\'s npm_package_version)', () => {
    const r = spawnSync(process.execPath, [path.join(packDir, pkg.bin.cronsafe), '--version'], {
      encoding: 'utf8',
      env: { ...process.env, npm_package_version: '9.9.9' },
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe(pkg.version);
  });

  it('runs from the unpacked tarball (every chunk the bin loads is in it)', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-unpacked-'));
    execFileSync('tar', ['-xzf', packed.filename, '-C', dir]);
    const root = path.join(dir, 'package');
    // Dependencies as `npm install cronsafe` would bring them (same versions, from the lock).
    symlinkSync(path.join(ROOT, 'node_modules'), path.join(root, 'node_modules'));
    const work = path.join(dir, 'work');
    mkdirSync(path.join(work, 'queue'), { recursive: true });
    for (const n of ['a.txt', 'b.txt']) writeFileSync(path.join(work, 'queue', n), n);
    const config = path.join(work, 'cronsafe.yaml');
    writeFileSync(config, YAML.stringify({
      name: 'packed', source: { directory: path.join(work, 'queue') }, output: { directory: path.join(work, 'out') },
      state: { sqlite: path.join(work, 'state/cronsafe.db') }, handler: { command: ['cp', '{path}', '{output}'] },
      log: { format: 'pretty' },
    }));
    const bin = path.join(root, pkg.bin.cronsafe);
    const validate = spawnSync(process.execPath, [bin, 'validate', '-c', config], { encoding: 'utf8', timeout: 60_000 });
    expect(validate.status, validate.stderr).toBe(0);
    const run = spawnSync(process.execPath, [bin, 'run', '-c', config], { encoding: 'utf8', timeout: 60_000 });
    expect(run.status, run.stderr).toBe(0);
    expect(readdirSync(path.join(work, 'out')).filter((f) => f.endsWith('.out')).sort()).toEqual(['a.txt.out', 'b.txt.out']);
  });
});

describe('helm package', () => {
  beforeAll(ensureTools);

  it("gives a chart whose version and appVersion are package.json's version", () => {
    const out = mkdtempSync(path.join(tmpdir(), 'cronsafe-chart-'));
    const r = helm(['package', CHART, '--destination', out]);
    expect(r.status, r.stderr).toBe(0);
    const tgz = path.join(out, `cronsafe-${pkg.version}.tgz`);
    expect(existsSync(tgz), r.stdout).toBe(true);
    const shown = helm(['show', 'chart', tgz]);
    expect(shown.status, shown.stderr).toBe(0);
    expect(YAML.parse(shown.stdout)).toMatchObject({ name: 'cronsafe', version: pkg.version, appVersion: pkg.version });
    // The packaged chart renders (its files/ came along: the init container's script).
    const rendered = helm(['template', 'qc', tgz]);
    expect(rendered.status, rendered.stderr).toBe(0);
    expect(rendered.stdout).toContain('cronsafe init-dirs: cannot create or %s the directory');
  });
});
