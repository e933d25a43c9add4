#!/usr/bin/env node
// Prints the body of one version's section of CHANGELOG.md (Keep a Changelog format:
// `## [1.2.3] - 2026-11-30` up to the next `## ` heading or the link references), for the
// GitHub release notes. Exits 1, naming the version, when the section is missing or
// empty: a release without its changelog entry fails before anything is published.
//
//   node scripts/changelog-section.mjs 0.1.0 [CHANGELOG.md]
import { readFileSync } from 'node:fs';

const [version, file = 'CHANGELOG.md'] = process.argv.slice(2);
if (!version) {
  console.error('usage: changelog-section.mjs VERSION [CHANGELOG.md]');
  process.exit(2);
}
const lines = readFileSync(file, 'utf8').split('\n');
const escaped = version.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const heading = new RegExp(`^## \\[${escaped}\\](\\s|$)`);
const start = lines.findIndex((l) => heading.test(l));
if (start < 0) {
  console.error(`${file}: no "## [${version}]" section`);
  process.exit(1);
}
let end = lines.findIndex((l, i) => i > start && (/^## /.test(l) || /^\[[^\]]+\]:\s/.test(l)));
if (end < 0) end = lines.length;
const body = lines.slice(start + 1, end).join('\n').trim();
if (body === '') {
  console.error(`${file}: the "## [${version}]" section is empty`);
  process.exit(1);
}
console.log(body);
