import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeDirs } from '../../src/make-dirs.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('makeDirs (mkdir -p that ends)', () => {
  it('makes every missing component, and is a no-op on an existing directory', () => {
    const root = mkdtempSync(path.join(tmpdir(), 'cronsafe-mkdirs-'));
    dirs.push(root);
    const deep = path.join(root, 'a', 'b', 'c');
    makeDirs(deep);
    expect(statSync(deep).isDirectory()).toBe(true);
    makeDirs(deep);
    makeDirs(root);
  });

  it.skipIf(!existsSync('/proc/self'))('throws where a directory cannot be made under /proc, where recursive mkdir never returns', () => {
    expect(() => makeDirs('/proc/cronsafe-no-such/state')).toThrow(/ENOENT/);
  }, 5_000);

  it('throws when a file is in the way', () => {
    const root = mkdtempSync(path.join(tmpdir(), 'cronsafe-mkdirs-'));
    dirs.push(root);
    writeFileSync(path.join(root, 'f'), '');
    expect(() => makeDirs(path.join(root, 'f'))).toThrow(/EEXIST/);
    expect(() => makeDirs(path.join(root, 'f', 'g'))).toThrow(/ENOTDIR/);
  });
});
