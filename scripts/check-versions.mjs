#!/usr/bin/env node
// One version everywhere a release publishes it: package.json's `version` is the source,
// and the chart's `version` and `appVersion`, the chart's image tag default, the
// kustomize base's image tag and the versions in the install commands of README.md, the
// chart's README.md and docs/
// must equal it, so that `helm install` and `kubectl apply -k`
// pull the image built from the same commit as the npm package.
//
//   node scripts/check-versions.mjs [--root DIR] [--tag vX.Y.Z]
//
// With --tag (the release workflow passes the pushed git tag) the tag must be `v` + that
// version too. Prints one line per disagreement, naming the file and key; exits 1 if any.
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import YAML from 'yaml';

const { values: opts } = parseArgs({
  options: { root: { type: 'string' }, tag: { type: 'string' } },
});
const root = path.resolve(opts.root ?? path.join(path.dirname(fileURLToPath(import.meta.url)), '..'));
const rel = (f) => path.relative(root, f);
const problems = [];

const pkgFile = path.join(root, 'package.json');
const version = JSON.parse(readFileSync(pkgFile, 'utf8')).version;
if (typeof version !== 'string' || !/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(version)) {
  problems.push(`${rel(pkgFile)}: version ${JSON.stringify(version)} is not a semantic version`);
}

function expectEqual(file, key, actual) {
  if (String(actual) !== version) {
    problems.push(`${rel(file)}: ${key} is ${JSON.stringify(actual)}, but package.json's version is ${JSON.stringify(version)}`);
  }
}

const charts = readdirSync(path.join(root, 'helm'), { withFileTypes: true }).filter((d) => d.isDirectory());
if (charts.length === 0) problems.push('helm/: no chart found');
for (const chart of charts) {
  const dir = path.join(root, 'helm', chart.name);
  const chartFile = path.join(dir, 'Chart.yaml');
  const meta = YAML.parse(readFileSync(chartFile, 'utf8'));
  expectEqual(chartFile, 'version', meta.version);
  expectEqual(chartFile, 'appVersion', meta.appVersion);
  const valuesFile = path.join(dir, 'values.yaml');
  const tag = YAML.parse(readFileSync(valuesFile, 'utf8'))?.image?.tag;
  // Empty means "the chart's appVersion", checked above.
  if (tag !== '' && tag !== undefined && tag !== null) expectEqual(valuesFile, 'image.tag', tag);
}

const kustomization = path.join(root, 'k8s/base/kustomization.yaml');
const images = YAML.parse(readFileSync(kustomization, 'utf8'))?.images ?? [];
if (images.length === 0) problems.push(`${rel(kustomization)}: images: no image tag to check`);
for (const image of images) expectEqual(kustomization, `images[${image.name}].newTag`, image.newTag);

// The install commands users copy from the docs name the version too.
const docs = [path.join(root, 'README.md'), path.join(root, 'helm/cronsafe/README.md'), ...readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => path.join(root, 'docs', f))];
for (const file of docs) {
  const text = readFileSync(file, 'utf8');
  for (const m of text.matchAll(/charts\/cronsafe --version (\d\S*)|ghcr\.io\/cronsafe\/cronsafe:(\d\S*?)(?=[\s`'")]|$)/gm)) {
    const found = m[1] ?? m[2];
    if (found !== version) problems.push(`${rel(file)}: ${JSON.stringify(m[0])} names ${found}, but package.json's version is ${JSON.stringify(version)}`);
  }
}

if (opts.tag !== undefined && opts.tag !== `v${version}`) {
  problems.push(`git tag ${JSON.stringify(opts.tag)} is not "v${version}" (package.json's version)`);
}

for (const p of problems) console.error(p);
if (problems.length > 0) process.exit(1);
console.log(`versions agree: ${version}`);
