/**
 * CHANGELOG.md has the section the release workflow publishes as the GitHub release's
 * notes (scripts/changelog-section.mjs), and Renovate's config covers the three kinds of
 * dependency: npm, the Dockerfile's base image (pinned by digest) and the actions.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const version = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

function section(v: string, file = path.join(ROOT, 'CHANGELOG.md')) {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'scripts/changelog-section.mjs'), v, file], { encoding: 'utf8', timeout: 30_000 });
  if (r.error) throw r.error;
  return r;
}

describe('CHANGELOG.md', () => {
  it("has a dated, non-empty section for package.json's version, which is the release notes", () => {
    expect(readFileSync(path.join(ROOT, 'CHANGELOG.md'), 'utf8')).toMatch(new RegExp(`^## \\[${version.replace(/\./g, '\\.')}\\] - \\d{4}-\\d{2}-\\d{2}$`, 'm'));
    const r = section(version);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('### Added');
    // Only that section: not the next version's heading, not the link references.
    expect(r.stdout).not.toMatch(/^## |^\[[^\]]+\]: /m);
  });

  it('a missing or empty section fails the release, naming the version', () => {
    const missing = section('9.9.9');
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain('no "## [9.9.9]" section');
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'cronsafe-changelog-')), 'CHANGELOG.md');
    writeFileSync(file, '# Changelog\n\n## [1.0.0] - 2026-01-01\n\n## [0.9.0] - 2025-12-01\n\n- x\n');
    const empty = section('1.0.0', file);
    expect(empty.status).toBe(1);
    expect(empty.stderr).toContain('the "## [1.0.0]" section is empty');
    expect(section('0.9.0', file).stdout.trim()).toBe('- x');
  });
});

describe('dependency updates (Renovate)', () => {
  const renovate = JSON.parse(readFileSync(path.join(ROOT, '.github/renovate.json'), 'utf8')) as {
    extends: string[]; customManagers: { matchStrings: string[] }[];
  };

  it("pins the Dockerfile's base image by digest, in a line Renovate's regex manager updates", () => {
    const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
    const arg = dockerfile.match(/^ARG NODE_IMAGE=(.*)$/m)?.[1];
    expect(arg).toMatch(/^node:22-bookworm-slim@sha256:[a-f0-9]{64}$/);
    const [pattern] = renovate.customManagers[0]?.matchStrings ?? [];
    const m = dockerfile.match(new RegExp(pattern ?? '(?!)'));
    expect(m?.groups).toMatchObject({ depName: 'node', currentValue: '22-bookworm-slim' });
    expect(m?.groups?.currentDigest).toMatch(/^sha256:[a-f0-9]{64}$/);
  });

  it('covers npm and the actions (config:recommended enables both managers)', () => {
    expect(renovate.extends).toEqual(expect.arrayContaining(['config:recommended', 'helpers:pinGitHubActionDigestsToSemver']));
  });
});
