import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

/**
 * `npm run build` type-checks src/ only (tsconfig.build.json); the tests, the benches and
 * the examples are type-checked here, so a broken test helper or a stale bench fails CI.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

it('tsc --noEmit passes on src, test, bench and examples (tsconfig.json, strict)', () => {
  const tsc = path.join(ROOT, 'node_modules/typescript/bin/tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', path.join(ROOT, 'tsconfig.json'), '--noEmit', '--pretty', 'false'], {
    encoding: 'utf8',
    timeout: 300_000,
  });
  expect(r.error).toBeUndefined();
  expect(`${r.stdout}${r.stderr}`.trim()).toBe('');
  expect(r.status).toBe(0);
}, 300_000);
