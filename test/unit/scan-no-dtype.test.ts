import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, opendirSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { opendir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { scanDirectory, type UnreadableDirectory } from '../../src/runner/scan.js';

/**
 * A file system whose directory listings give no entry types (d_type DT_UNKNOWN: ext4 made
 * with `-O ^filetype`, here on a loop device; XFS with ftype=0, NFSv3, many FUSE file
 * systems): Node lstat()s each entry of a batch inside the read, and one entry renamed or
 * removed since the batch was listed (a producer's rename, normal in a source directory)
 * failed the whole read with ENOENT: the scan failed, or the rest of the directory was lost.
 * Needs root and loop devices; skipped, saying why, elsewhere.
 */

const work = mkdtempSync(path.join(tmpdir(), 'cronsafe-no-dtype-'));
const mnt = path.join(work, 'mnt');
mkdirSync(mnt);
const cantMount = ((): string | null => {
  if (process.getuid?.() !== 0) return 'not root';
  const image = path.join(work, 'fs.img');
  for (const [cmd, ...args] of [
    ['truncate', '-s', '32M', image],
    ['mkfs.ext4', '-q', '-F', '-N', '20000', '-O', '^filetype', image],
    ['mount', '-o', 'loop', image, mnt],
  ] as const) {
    const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 30_000 });
    if (r.status !== 0) return `${cmd}: ${r.error?.message ?? (r.stderr.trim() || `exit ${r.status}`)}`;
  }
  return null;
})();
afterAll(() => {
  if (cantMount === null) spawnSync('umount', ['-l', mnt]);
  rmSync(work, { recursive: true, force: true });
});
const skipped = cantMount ? ` (skipped: cannot mount an ext4 without filetype on a loop device here: ${cantMount})` : '';

let dirs = 0;
/** A fresh directory on the mount holding `n` files, and their names in the order the file system lists them. */
function flat(n: number): { dir: string; order: string[] } {
  const dir = path.join(mnt, `d${++dirs}`);
  mkdirSync(dir);
  for (let i = 0; i < n; i++) writeFileSync(path.join(dir, `f${String(i).padStart(5, '0')}.txt`), '');
  const d = opendirSync(dir);
  const order: string[] = [];
  for (let e = d.readSync(); e !== null; e = d.readSync()) order.push(e.name);
  d.closeSync();
  return { dir, order };
}

/** Scan `dir`, calling `after(given)` once `at` items were given; the ids in the order given, and the directories reported. */
async function scanWith(dir: string, at: number, after: (given: string[]) => void) {
  const given: string[] = [];
  const reported: UnreadableDirectory[] = [];
  for await (const item of scanDirectory({ directory: dir, include: ['**'], exclude: [], onUnreadable: (d) => reported.push(d) })) {
    given.push(item.id);
    if (given.length === at) after(given);
  }
  return { given, reported };
}

const dups = (ids: string[]): string[] => ids.filter((id, i) => ids.indexOf(id) !== i);

describe('scan on a file system without entry types (ext4 -O ^filetype)', () => {
  it.skipIf(cantMount !== null)(`the hazard is there: Node's own listing fails with ENOENT when a listed entry is removed before its batch is read${skipped}`, async () => {
    const { dir, order } = flat(300);
    const d = await opendir(dir);
    await d.read();
    unlinkSync(path.join(dir, order[200]!));
    await expect((async () => {
      for await (const _ of d) void _;
    })()).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it.skipIf(cantMount !== null)(`entries removed or renamed mid-scan: every other file is given once, none twice, the scan complete${skipped}`, async () => {
    const { dir, order } = flat(600);
    const removed = new Set([order[100]!, order[101]!, order[250]!, order[400]!, order[599]!]);
    const { given, reported } = await scanWith(dir, 10, () => {
      for (const name of removed) {
        // A producer's rename (the old name vanishes) and plain removals.
        if (name === order[250]) renameSync(path.join(dir, name), path.join(dir, `renamed-${name}`));
        else unlinkSync(path.join(dir, name));
      }
    });
    expect(dups(given)).toEqual([]);
    expect(reported).toEqual([]);
    const stayed = order.filter((n) => !removed.has(n));
    expect(given.filter((id) => !id.startsWith('renamed-')).sort()).toEqual(stayed.sort());
  });

  it.skipIf(cantMount !== null)(`in a large directory, past the entries it remembers, also when the last ones given are gone: none lost, none twice${skipped}`, async () => {
    const { dir, order } = flat(3000);
    // The 12 given last removed too (a handler that removes its input) and those Node had
    // read after them (whose batch it lstat()ed already, given all the same), and every 7th of the rest.
    const removed = new Set([...order.slice(1088, 1160), ...order.slice(1160).filter((_, i) => i % 7 === 3)]);
    const { given, reported } = await scanWith(dir, 1100, (g) => {
      expect(g).toEqual(order.slice(0, 1100));
      for (const name of removed) unlinkSync(path.join(dir, name));
    });
    expect(dups(given)).toEqual([]);
    expect(reported).toEqual([]);
    // One removed after Node had listed it (its batch read) may be given still; the pass forgets it.
    expect(given).toEqual(expect.arrayContaining(order.filter((n) => !removed.has(n))));
    expect(order).toEqual(expect.arrayContaining(given));
  });

  it.skipIf(cantMount !== null)(`when every entry it remembers is gone, the rest waits: told as a directory read in part (the scan partial), none given twice${skipped}`, async () => {
    const { dir, order } = flat(3000);
    const removed = new Set([...order.slice(900, 1300), ...order.slice(1300).filter((_, i) => i % 7 === 3)]);
    const { given, reported } = await scanWith(dir, 1100, () => {
      for (const name of removed) unlinkSync(path.join(dir, name));
    });
    expect(dups(given)).toEqual([]);
    expect(reported).toEqual([{ path: dir, id: '', code: 'ENOENT', changing: true }]);
    expect(given.length).toBeLessThan(1200);
  });

  it.skipIf(cantMount !== null)(`in a subdirectory, among others: the scan goes on past it, each file once${skipped}`, async () => {
    const root = path.join(mnt, `tree${++dirs}`);
    mkdirSync(root);
    writeFileSync(path.join(root, 'a.txt'), '');
    const { dir, order } = flat(400);
    renameSync(dir, path.join(root, 'sub'));
    writeFileSync(path.join(root, 'z.txt'), '');
    const sub = path.join(root, 'sub');
    const { given, reported } = await scanWith(root, 3, () => {
      for (const i of [200, 201, 350]) unlinkSync(path.join(sub, order[i]!));
    });
    expect(dups(given)).toEqual([]);
    expect(reported).toEqual([]);
    expect(given.filter((id) => id.startsWith('sub/')).length).toBe(397);
    expect(given).toEqual(expect.arrayContaining(['a.txt', 'z.txt']));
  });

  it.skipIf(cantMount !== null)(`names that are not ASCII, not UTF-8, or hold a backslash get the ids they get with entry types; links to files are followed${skipped}`, async () => {
    const dir = path.join(mnt, `bytes${++dirs}`);
    mkdirSync(path.join(dir, 'sub'), { recursive: true });
    const names = [Buffer.from('plain.txt'), Buffer.from('café.txt'), Buffer.from([0x63, 0x61, 0x66, 0xe9]), Buffer.from('back\\slash'), Buffer.from('日本')];
    for (const n of names) writeFileSync(Buffer.concat([Buffer.from(`${dir}/sub/`), n]), '');
    symlinkSync('sub/plain.txt', path.join(dir, 'link.txt'));
    const given: string[] = [];
    const reported: UnreadableDirectory[] = [];
    for await (const item of scanDirectory({ directory: dir, include: ['**'], exclude: [], onUnreadable: (d) => reported.push(d) })) given.push(item.id);
    expect(reported).toEqual([]);
    expect(given.sort()).toEqual(['link.txt', 'sub/back\\\\slash', 'sub/caf\\xe9', 'sub/café.txt', 'sub/plain.txt', 'sub/日本'].sort());
  });

  // With entry types, such a file is an item (its attempt is refused: byte-names.test.ts).
  it.skipIf(cantMount !== null)(`a file whose path is past PATH_MAX in a subdirectory: that directory is told unreadable (ENAMETOOLONG), the rest scanned (before: the scan failed)${skipped}`, async () => {
    const root = path.join(mnt, `long${++dirs}`);
    mkdirSync(root);
    writeFileSync(path.join(root, 'a.txt'), '');
    let deep = root;
    while (deep.length < 3900) mkdirSync((deep = path.join(deep, 'd'.repeat(200))));
    // Made from inside its directory: its path is too long to be named whole.
    expect(spawnSync('sh', ['-c', ': > "$1"', 'sh', 'x'.repeat(250)], { cwd: deep }).status).toBe(0);
    const reported: UnreadableDirectory[] = [];
    const given: string[] = [];
    for await (const item of scanDirectory({ directory: root, include: ['**'], exclude: [], onUnreadable: (d) => reported.push(d) })) given.push(item.id);
    expect(given).toEqual(['a.txt']);
    expect(reported).toEqual([{ path: deep, id: path.relative(root, deep), code: 'ENAMETOOLONG' }]);
  });
});
