/**
 * One version everywhere a release publishes it (scripts/check-versions.mjs, also run by
 * the release workflow with the pushed tag): package.json, the chart's version and
 * appVersion, the chart's image tag default, the kustomize base's image tag and the
 * install commands in README.md, the chart's README.md and docs/. Each
 * disagreement, made in a copy of those files, must fail the check and name the file and
 * key.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SCRIPT = path.join(ROOT, 'scripts/check-versions.mjs');
const version = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

function check(root: string, ...args: string[]) {
  const r = spawnSync(process.execPath, [SCRIPT, '--root', root, ...args], { encoding: 'utf8', timeout: 30_000 });
  if (r.error) throw r.error;
  return r;
}

/** A copy of the files the check reads, with one of them edited. */
function copyWith(file: string, edit: (text: string) => string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-versions-'));
  cpSync(path.join(ROOT, 'package.json'), path.join(dir, 'package.json'));
  cpSync(path.join(ROOT, 'helm'), path.join(dir, 'helm'), { recursive: true });
  mkdirSync(path.join(dir, 'k8s/base'), { recursive: true });
  cpSync(path.join(ROOT, 'k8s/base/kustomization.yaml'), path.join(dir, 'k8s/base/kustomization.yaml'));
  cpSync(path.join(ROOT, 'README.md'), path.join(dir, 'README.md'));
  cpSync(path.join(ROOT, 'docs'), path.join(dir, 'docs'), { recursive: true });
  const target = path.join(dir, file);
  const before = readFileSync(target, 'utf8');
  const after = edit(before);
  expect(after, `the edit of ${file} changed nothing`).not.toBe(before);
  writeFileSync(target, after);
  return dir;
}

describe('versions', () => {
  it('agree in this repository', () => {
    const r = check(ROOT);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`versions agree: ${version}`);
  });

  it.each([
    ['helm/cronsafe/Chart.yaml', /^version: .*$/m, 'version: 9.9.9', 'helm/cronsafe/Chart.yaml: version is "9.9.9"'],
    ['helm/cronsafe/Chart.yaml', /^appVersion: .*$/m, 'appVersion: "9.9.9"', 'helm/cronsafe/Chart.yaml: appVersion is "9.9.9"'],
    ['helm/cronsafe/values.yaml', /^ {2}tag: ""$/m, '  tag: "9.9.9"', 'helm/cronsafe/values.yaml: image.tag is "9.9.9"'],
    ['k8s/base/kustomization.yaml', /newTag: .*$/m, 'newTag: "9.9.9"', 'k8s/base/kustomization.yaml: images[ghcr.io/cronsafe/cronsafe].newTag is "9.9.9"'],
    ['package.json', /"version": "[^"]*"/, '"version": "9.9.9"', 'helm/cronsafe/Chart.yaml: version is'],
    ['README.md', /charts\/cronsafe --version \S+/, 'charts/cronsafe --version 9.9.9', 'README.md: "charts/cronsafe --version 9.9.9" names 9.9.9'],
    ['helm/cronsafe/README.md', /charts\/cronsafe --version \S+/, 'charts/cronsafe --version 9.9.9', 'helm/cronsafe/README.md: "charts/cronsafe --version 9.9.9" names 9.9.9'],
    ['docs/kubernetes.md', /ghcr\.io\/cronsafe\/cronsafe:[\d.]+/, 'ghcr.io/cronsafe/cronsafe:9.9.9', 'docs/kubernetes.md: "ghcr.io/cronsafe/cronsafe:9.9.9" names 9.9.9'],
  ])('disagree when %s says %s', (file, pattern, replacement, message) => {
    const r = check(copyWith(file, (t) => t.replace(pattern, replacement)));
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(message);
  });

  it('a tag must be v + the version (the release workflow passes the pushed tag)', () => {
    expect(check(ROOT, '--tag', `v${version}`).status).toBe(0);
    const r = check(ROOT, '--tag', 'v9.9.9');
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`git tag "v9.9.9" is not "v${version}"`);
  });
});
