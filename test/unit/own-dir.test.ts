/**
 * chmodSame: cronsafe gives itself rights back on its own directories (and on a handler's
 * tree in them) by lstat, then chmod. Between the two a process of the same user (a
 * handler's child left running) may put a symbolic link where the directory was, and
 * chmod(2) follows links: run as root, `mode | 0o700` landed on the link's target (a file
 * such as /etc/passwd made executable). Here the swap is made between the lstat and the
 * call, as that process would make it.
 */
import { lstatSync, mkdirSync, mkdtempSync, renameSync, rmdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { chmodSame } from '../../src/runner/own-dir.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-own-dir-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const modeOf = (p: string): number => statSync(p).mode & 0o7777;

describe.skipIf(process.platform !== 'linux')('chmodSame', () => {
  it('changes the directory it was given while it is still that directory, even with no rights on it', () => {
    const d = path.join(dir, 'tmp');
    mkdirSync(d, { mode: 0o000 });
    expect(chmodSame(d, lstatSync(d), 0o700)).toBe(true);
    expect(modeOf(d)).toBe(0o700);
  });

  it('does not follow a symbolic link put in its place after the lstat: the link target keeps its mode', () => {
    const d = path.join(dir, 'tmp');
    const canary = path.join(dir, 'passwd');
    writeFileSync(canary, 'root:x:0:0::/root:/bin/sh\n', { mode: 0o644 });
    mkdirSync(d, { mode: 0o555 });
    const seen = lstatSync(d);
    rmdirSync(d);
    symlinkSync(canary, d);
    expect(chmodSame(d, seen, (seen.mode & 0o7777) | 0o700)).toBe(false);
    expect(modeOf(canary)).toBe(0o644);
  });

  it('leaves alone another directory put in its place (renamed there after the lstat)', () => {
    const d = path.join(dir, 'tmp');
    const other = path.join(dir, 'other');
    mkdirSync(d, { mode: 0o555 });
    mkdirSync(other, { mode: 0o500 });
    const seen = lstatSync(d);
    rmdirSync(d);
    renameSync(other, d);
    expect(chmodSame(d, seen, 0o700)).toBe(false);
    expect(modeOf(d)).toBe(0o500);
  });

  it('says false for an entry gone meanwhile, without throwing', () => {
    const d = path.join(dir, 'tmp');
    mkdirSync(d, { mode: 0o555 });
    const seen = lstatSync(d);
    rmdirSync(d);
    expect(chmodSame(d, seen, 0o700)).toBe(false);
  });
});
