import { chmodSync, chownSync, existsSync, linkSync, utimesSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { realBirthTimes } from '../../src/runner/output-fs.js';
import { NAME_MAX, checkItemId, outputName, sourceInOutput } from '../../src/runner/output-name.js';
import { OutputStore, OwnDirectoryGone } from '../../src/runner/output.js';
import { EnvironmentFault } from '../../src/runner/faults.js';

let dir: string;
let out: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-output-'));
  out = path.join(dir, 'out');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** Every file under `root`, relative, sorted. */
/** An attempt's temp path as its handler is given it (its own directory made). */
function given(store: OutputStore, id: string, attempt: number): string {
  const tmp = store.tempPathFor(id, attempt);
  store.makeAttemptDir(tmp);
  return tmp;
}

/** The files in the store's attempt directories (which stay, for the next attempts). */
function tempFiles(store: OutputStore): string[] {
  return readdirSync(store.tempDir).flatMap((slot) => readdirSync(path.join(store.tempDir, slot)));
}

function tree(root: string): string[] {
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(root, path.join(e.parentPath, e.name)))
    .sort();
}

describe('checkItemId', () => {
  it.each([
    ['', /empty id/],
    ['../x', /"\.\." segment/],
    ['a/../../x', /"\.\." segment/],
    ['a/..', /"\.\." segment/],
    ['/etc/passwd', /absolute/],
    ['a//b', /empty path segment/],
    ['a/', /empty path segment/],
    ['./a', /"\." segment/],
    ['a\\b', /backslash/],
    ['..\\x', /backslash/],
    ['a\0b', /NUL/],
  ])('rejects %j', (id, reason) => {
    expect(checkItemId(id)).toMatch(reason);
  });

  it.each(['ok/file.scc', '日本.scc', 'a.b/c', '..hidden', 'x..', '.cronsafe-tmp', 'with space/$(x)', 'back\\\\slash', 'caf\\xe9.txt', 'd\\xff/x'])('accepts %j', (id) => {
    expect(checkItemId(id)).toBeNull();
  });
});

describe('OutputStore paths', () => {
  it('maps an id to <outDir>/<id>.out', () => {
    const store = new OutputStore(out);
    expect(store.finalPathFor('ok/file.scc')).toBe(path.join(out, 'ok', 'file.scc.out'));
    expect(store.finalPathFor('日本.scc')).toBe(path.join(out, '日本.scc.out'));
  });

  it('throws for unsafe ids, naming the id', () => {
    const store = new OutputStore(out);
    expect(() => store.finalPathFor('../x')).toThrow(/unsafe item id "\.\.\/x"/);
    expect(() => store.finalPathFor('/etc/passwd')).toThrow(/absolute/);
  });

  it('never resolves outside outDir, whatever the id (property)', () => {
    const store = new OutputStore(out);
    const segment = fc.constantFrom('..', '.', '', 'a', '/', '\\', 'x.scc', '\0', '日本', '.cronsafe-tmp');
    const id = fc.oneof(fc.string(), fc.array(segment, { maxLength: 6 }).map((s) => s.join('/')));
    fc.assert(
      fc.property(id, (candidate) => {
        let final: string;
        try {
          final = store.finalPathFor(candidate);
        } catch {
          return true;
        }
        return final.startsWith(out + path.sep) && !final.startsWith(store.tempDir + path.sep);
      }),
      { numRuns: 2000 },
    );
  });

  it('makes unique temp names from a per-run prefix and a counter, never from the id text', () => {
    const store = new OutputStore(out);
    const id = '../../etc/passwd';
    const a = store.tempPathFor(id, 1);
    const b = store.tempPathFor(id, 1);
    expect(a).not.toBe(b);
    for (const p of [a, b]) {
      // Each attempt's {output} in a directory of its own (a handler that breaks it breaks no other attempt).
      expect(path.dirname(path.dirname(p))).toBe(store.tempDir);
      expect(path.relative(store.tempDir, p)).toMatch(/^[0-9a-f]{12}\.\d+\/[0-9a-f]{12}-\d+-\d+\.tmp$/);
    }
    // Another store (another run) never makes the same names.
    expect(new OutputStore(out).tempPathFor(id, 1)).not.toBe(a);
  });
});

describe('OutputStore commit / discard', () => {
  it('renames the temp file into place (same inode) and leaves no temp litter', async () => {
    const store = new OutputStore(out);
    await store.prepare();
    const tmp = given(store, 'dir/a.scc', 1);
    writeFileSync(tmp, 'first');
    const ino = statSync(tmp).ino;
    expect(await store.commit(tmp, 'dir/a.scc')).toBe(true);
    const final = path.join(out, 'dir', 'a.scc.out');
    expect(readFileSync(final, 'utf8')).toBe('first');
    expect(statSync(final).ino).toBe(ino); // a rename, not a copy: readers never see half a file
    expect(tempFiles(store)).toEqual([]);
  });

  it('overwrites on redo, never duplicates', async () => {
    const store = new OutputStore(out);
    await store.prepare();
    for (const [attempt, text] of [[1, 'first'], [2, 'second']] as const) {
      const tmp = given(store, 'a.scc', attempt);
      writeFileSync(tmp, text);
      expect(await store.commit(tmp, 'a.scc')).toBe(true);
    }
    expect(tree(out)).toEqual(['a.scc.out']);
    expect(readFileSync(path.join(out, 'a.scc.out'), 'utf8')).toBe('second');
  });

  it('committedSince: an output committed after the claim time is proof; an older one, none, a link on the way or an unsafe id is not', async () => {
    const store = new OutputStore(out);
    await store.prepare();
    const claimedAt = Date.now() - 5_000;
    expect(store.committedSince('a.scc', claimedAt), 'no file').toBe(false);
    const tmp = given(store, 'a.scc', 1);
    writeFileSync(tmp, 'whole');
    expect(await store.commit(tmp, 'a.scc')).toBe(true);
    expect(store.committedSince('a.scc', claimedAt)).toBe(true);
    // A later claim is not proven by this older output, whatever was done to it since
    // (each of these moves its ctime and mtime, not its birth time).
    await new Promise((r) => setTimeout(r, 60));
    const later = Date.now();
    await new Promise((r) => setTimeout(r, 20));
    const final = path.join(out, 'a.scc.out');
    chmodSync(final, 0o600);
    linkSync(final, path.join(dir, 'backup-link'));
    utimesSync(final, new Date(), new Date());
    writeFileSync(final, 'rewritten in place');
    expect(statSync(final).ctimeMs).toBeGreaterThanOrEqual(later);
    expect(store.committedSince('a.scc', later)).toBe(false);
    // A new commit (a new file renamed into place) is proof for the later claim.
    const tmp2 = given(store, 'a.scc', 2);
    writeFileSync(tmp2, 'whole again');
    expect(await store.commit(tmp2, 'a.scc')).toBe(true);
    expect(store.committedSince('a.scc', later)).toBe(true);
    // A subdirectory that is a link to elsewhere: never look through it.
    const elsewhere = path.join(dir, 'elsewhere');
    mkdirSync(elsewhere);
    writeFileSync(path.join(elsewhere, 'b.scc.out'), 'foreign');
    symlinkSync(elsewhere, path.join(out, 'sub'));
    expect(store.committedSince('sub/b.scc', claimedAt)).toBe(false);
    expect(store.committedSince('../escape', claimedAt)).toBe(false);
  });

  it("committedSince: an output made just after the claim is proof though the kernel's coarse file clock stamped it a few ms before the claim's time", async () => {
    const store = new OutputStore(out);
    await store.prepare();
    const tmp = given(store, 'a.scc', 1);
    writeFileSync(tmp, 'whole');
    expect(await store.commit(tmp, 'a.scc')).toBe(true);
    // File times come from the kernel's coarse clock, up to a tick (4 ms at HZ=250, 10 ms at
    // HZ=100) behind Date.now(): a file made 1 ms after a claim can be born "before" it.
    const born = statSync(path.join(out, 'a.scc.out')).birthtimeMs;
    expect(store.committedSince('a.scc', born + 6)).toBe(true);
  });

  it('realBirthTimes: a directory written to after it was made shows real birth times here; nothing to look at proves nothing', () => {
    mkdirSync(out);
    // Add entries until the kernel's file-time clock (a coarse one) has ticked past the birth.
    for (let i = 0; statSync(out).ctimeMs === statSync(out).birthtimeMs && i < 100_000; i++) writeFileSync(path.join(out, `entry-${i}`), 'x');
    expect(statSync(out).birthtimeMs, 'this machine keeps birth times (statx)').toBeGreaterThan(0);
    expect(realBirthTimes([path.join(dir, 'missing'), out])).toBe(true);
    expect(realBirthTimes([path.join(dir, 'missing')])).toBe(false);
  });

  it('returns false and writes nothing when the handler created no file', async () => {
    const store = new OutputStore(out);
    await store.prepare();
    expect(await store.commit(store.tempPathFor('a.scc', 1), 'a.scc')).toBe(false);
    expect(tree(out)).toEqual([]);
  });

  it('refuses an unsafe id before touching the temp file', async () => {
    const store = new OutputStore(out);
    await store.prepare();
    const tmp = given(store, '../x', 1);
    writeFileSync(tmp, 'data');
    await expect(store.commit(tmp, '../x')).rejects.toThrow(/unsafe item id/);
    expect(existsSync(tmp)).toBe(true);
    expect(existsSync(path.join(dir, 'x.out'))).toBe(false);
  });

  it('refuses paths outside its temp dir for commit and discard', async () => {
    const store = new OutputStore(out);
    await store.prepare();
    const outside = path.join(dir, 'precious');
    writeFileSync(outside, 'keep');
    await expect(store.commit(outside, 'a')).rejects.toThrow(/not a cronsafe temp path/);
    await expect(store.discard(outside)).rejects.toThrow(/not a cronsafe temp path/);
    expect(readFileSync(outside, 'utf8')).toBe('keep');
  });

  it('discards a temp file, and tolerates one that was never written', async () => {
    const store = new OutputStore(out);
    await store.prepare();
    const tmp = given(store, 'a', 1);
    writeFileSync(tmp, 'partial');
    await store.discard(tmp);
    await store.discard(store.tempPathFor('b', 1));
    expect(tempFiles(store)).toEqual([]);
  });

  it('an attempt directory is reused once its attempt is over, its rights given back; one replaced by a link is refused and never handed out again', async () => {
    const store = new OutputStore(out);
    await store.prepare();
    const a = given(store, 'a', 1);
    writeFileSync(a, 'partial');
    chmodSync(path.dirname(a), 0o555); // its handler's `chmod 555 "$(dirname "$2")"`
    await store.discard(a);
    expect(statSync(path.dirname(a)).mode & 0o777).toBe(0o755);
    const b = given(store, 'b', 1);
    expect(path.dirname(b)).toBe(path.dirname(a));
    const elsewhere = path.join(dir, 'elsewhere');
    mkdirSync(elsewhere);
    writeFileSync(path.join(elsewhere, path.basename(b)), 'not ours');
    renameSync(path.dirname(b), `${path.dirname(b)}.moved`);
    symlinkSync(elsewhere, path.dirname(b));
    await expect(store.commit(b, 'b')).rejects.toThrow(/is a symbolic link .*; it was replaced during the run: stopping \(nothing charged\)$/);
    await expect(store.discard(b)).rejects.toThrow(/is a symbolic link/);
    expect(readFileSync(path.join(elsewhere, path.basename(b)), 'utf8')).toBe('not ours');
    expect(existsSync(store.finalPathFor('b'))).toBe(false);
    expect(path.dirname(given(store, 'c', 1))).not.toBe(path.dirname(b));
  });

  it('an attempt directory removed under its attempt (a cleaner, `rm -rf` on its way): OwnDirectoryGone, not the item\'s failure; made again for the next attempt', async () => {
    const store = new OutputStore(out);
    await store.prepare();
    const a = given(store, 'a', 1);
    rmSync(path.dirname(a), { recursive: true });
    await expect(store.commit(a, 'a')).rejects.toBeInstanceOf(OwnDirectoryGone);
    const b = given(store, 'b', 1);
    rmSync(path.dirname(b), { recursive: true });
    expect(await store.discard(b)).toBeInstanceOf(OwnDirectoryGone);
    // Removed while no attempt held it: made again when handed out.
    const c = given(store, 'c', 1);
    expect(await store.commit(c, 'c')).toBe(false);
    rmSync(path.dirname(c), { recursive: true });
    const d = given(store, 'd', 1);
    expect(path.dirname(d)).toBe(path.dirname(c));
    writeFileSync(d, 'whole');
    expect(await store.commit(d, 'd')).toBe(true);
    expect(readFileSync(store.finalPathFor('d'), 'utf8')).toBe('whole');
  });

  it('prepare() removes temp files a killed run left, and keeps committed outputs', async () => {
    mkdirSync(path.join(out, '.cronsafe-tmp', 'junkdir'), { recursive: true });
    writeFileSync(path.join(out, '.cronsafe-tmp', 'stale-1.tmp'), 'half');
    writeFileSync(path.join(out, '.cronsafe-tmp', 'junkdir', 'x'), 'half');
    writeFileSync(path.join(out, 'done.scc.out'), 'kept');
    await new OutputStore(out).prepare();
    expect(readdirSync(path.join(out, '.cronsafe-tmp'))).toEqual([]);
    expect(readFileSync(path.join(out, 'done.scc.out'), 'utf8')).toBe('kept');
  });

  it('prepare() creates a missing output directory', async () => {
    const store = new OutputStore(path.join(dir, 'deep', 'er', 'out'));
    await store.prepare();
    expect(statSync(store.tempDir).isDirectory()).toBe(true);
  });
});

describe('OutputStore: its temp directory vanishes or is replaced', () => {
  it('discard() and a commit that finds no file report OwnDirectoryGone and recreate the directory', async () => {
    const store = new OutputStore(out);
    await store.prepare();
    expect(store.checkTempDir()).toBeNull();
    rmSync(store.tempDir, { recursive: true });
    expect(await store.discard(store.tempPathFor('a', 1))).toBeInstanceOf(OwnDirectoryGone);
    expect(statSync(store.tempDir).isDirectory()).toBe(true);
    expect(await store.discard(store.tempPathFor('a', 2))).toBeNull();

    rmSync(store.tempDir, { recursive: true });
    await expect(store.commit(store.tempPathFor('b', 1), 'b')).rejects.toBeInstanceOf(OwnDirectoryGone);
    expect(await store.commit(store.tempPathFor('b', 2), 'b')).toBe(false); // really nothing written now
  });

  it('a shared run whose periodic touch recreated the directory: an attempt of the old one is OwnDirectoryGone, not the item\'s', async () => {
    // PostgreSQL pods share output.directory: each touches (and recreates) its own temp
    // directory every quarter of staleAfterMs as it hands out paths.
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const store = new OutputStore(out, { run: 'host:1:run-a', staleAfterMs: 4_000 });
      await store.prepare();
      const before = store.tempPathFor('a', 1);
      rmSync(path.join(out, '.cronsafe-tmp'), { recursive: true }); // a cleaner
      vi.setSystemTime(Date.now() + 2_000);
      const after = store.tempPathFor('b', 1); // the touch recreates it
      expect(statSync(store.tempDir).isDirectory()).toBe(true);
      // The first attempt's handler found no directory to write into: not its item's fault.
      expect(await store.discard(before)).toBeInstanceOf(OwnDirectoryGone);
      expect(await store.discard(after)).toBeNull();
    } finally {
      vi.useRealTimers();
    }
  });

  it('a commit that finds no file after another attempt already recreated the directory: OwnDirectoryGone, never "wrote nothing"', async () => {
    const store = new OutputStore(out);
    await store.prepare();
    const tmp = given(store, 'c', 1);
    writeFileSync(tmp, 'written, then lost with the directory');
    rmSync(store.tempDir, { recursive: true });
    // A sibling attempt noticed first and recreated it.
    expect(store.checkTempDir()).toBeInstanceOf(OwnDirectoryGone);
    await expect(store.commit(tmp, 'c')).rejects.toBeInstanceOf(OwnDirectoryGone);
    expect(existsSync(path.join(out, 'c.out'))).toBe(false);
    // A path handed out after the recreation that really got nothing is still "wrote nothing".
    expect(await store.commit(store.tempPathFor('c', 2), 'c')).toBe(false);
  });

  it.skipIf(process.getuid?.() !== 0)("is trusted when owned by output.directory's owner (root on NFS with root_squash), refused when owned by a third user", async () => {
    mkdirSync(path.join(out, '.cronsafe-tmp'), { recursive: true });
    chownSync(out, 65534, 65534);
    chownSync(path.join(out, '.cronsafe-tmp'), 65534, 65534);
    await new OutputStore(out).prepare();
    chownSync(path.join(out, '.cronsafe-tmp'), 12345, 12345);
    await expect(new OutputStore(out).prepare()).rejects.toThrow(/owned by uid 12345, not by cronsafe's uid 0 nor by output.directory's owner \(uid 65534\)/);
  });

  it('a link put in its place is refused, not followed or recreated through', async () => {
    const store = new OutputStore(out);
    await store.prepare();
    const elsewhere = path.join(dir, 'elsewhere');
    mkdirSync(elsewhere);
    rmSync(store.tempDir, { recursive: true });
    symlinkSync(elsewhere, store.tempDir);
    // Mid-run: the environment's fault (the pass stops, nothing charged), naming the link.
    expect(() => store.checkTempDir()).toThrow(EnvironmentFault);
    expect(() => store.checkTempDir()).toThrow(/\.cronsafe-tmp is a symbolic link .*; it was replaced during the run: stopping \(nothing charged\)$/);
    expect(readdirSync(elsewhere)).toEqual([]);
  });

  it("a shared run's periodic touch that finds a link in its directory's place: the same environment fault, nothing written through it", async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const store = new OutputStore(out, { run: 'host:1:run-a', staleAfterMs: 4_000 });
      await store.prepare();
      const elsewhere = path.join(dir, 'elsewhere');
      mkdirSync(elsewhere);
      rmSync(store.tempDir, { recursive: true });
      symlinkSync(elsewhere, store.tempDir);
      vi.setSystemTime(Date.now() + 2_000); // due for the touch, which recreates
      expect(() => store.tempPathFor('a', 1)).toThrow(EnvironmentFault);
      expect(() => store.tempPathFor('a', 1)).toThrow(/is a symbolic link .*; it was replaced during the run: stopping \(nothing charged\)$/);
      expect(readdirSync(elsewhere)).toEqual([]);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('outputName: every id gets a writable, distinct output path', () => {
  const bytes = (s: string) => Buffer.byteLength(s);

  it('a 255-byte directory named like an output keeps apart from the file it would meet', () => {
    const file = 'x'.repeat(251); // its output: x...x.out, 255 bytes
    const dirItem = `${file}.out/b`; // its directory segment is that very name
    const fileOut = outputName(file);
    const dirOut = outputName(dirItem);
    expect(fileOut).toBe(`${file}.out`);
    const dirSeg = dirOut.split('/')[0]!;
    expect(dirSeg).not.toBe(fileOut);
    expect(bytes(dirSeg)).toBeLessThanOrEqual(255);
    expect(dirSeg).not.toMatch(/\.out$/);
    expect(dirOut.endsWith('/b.out')).toBe(true);
  });

  it('is <id>.out for ordinary ids', () => {
    expect(outputName('a.scc')).toBe('a.scc.out');
    expect(outputName('d/e/f.txt')).toBe('d/e/f.txt.out');
    expect(outputName('caf\\xe9.txt')).toBe('caf\\xe9.txt.out');
  });

  it('moves a directory that ends in .out aside, so `a` and `a.out/b` both have a place', () => {
    expect(outputName('a')).toBe('a.out');
    expect(outputName('a.out/b')).toBe('a.out~/b.out');
    expect(outputName('a.out~/b')).toBe('a.out~~/b.out');
    expect(outputName('x/a.out/b')).toBe('x/a.out~/b.out');
    expect(outputName('.cronsafe-tmp/x')).toBe('.cronsafe-tmp~/x.out'); // never into our temp directory
    expect(outputName('d/.cronsafe-tmp/x')).toBe('d/.cronsafe-tmp/x.out'); // only the top level is ours
  });

  it('shortens a name past NAME_MAX with a hash, deterministically, on a character boundary', () => {
    const long = 'é'.repeat(127) + '.txt'; // 258 bytes; + .out is 262
    const name = outputName(long);
    expect(name).toBe(outputName(long));
    expect(bytes(name)).toBeLessThanOrEqual(NAME_MAX);
    expect(name).toMatch(/^(é)+~[0-9a-f]{16}\.out$/);
    expect(outputName('a'.repeat(251))).toBe(`${'a'.repeat(251)}.out`); // 255 bytes exactly: as is
    expect(outputName('a'.repeat(252))).toMatch(/^a{234}~[0-9a-f]{16}\.out$/);
    // Two long names that share their first 234 bytes still differ.
    expect(outputName(`${'a'.repeat(240)}x1`)).not.toBe(outputName(`${'a'.repeat(240)}x2`));
    // A long directory segment (escapes can make one) is shortened too.
    const dir = '\\xff'.repeat(100);
    expect(bytes(outputName(`${dir}/f`).split('/')[0]!)).toBeLessThanOrEqual(NAME_MAX);
    // A short name that looks hashed is hashed as well, so none can pose as another's.
    expect(outputName(`x~${'0'.repeat(16)}`)).not.toBe(`x~${'0'.repeat(16)}.out`);
  });

  it('never maps two ids to the same path, nor one file to another output\'s directory (property)', () => {
    const seg = fc.oneof(
      fc.constantFrom('a', 'a.out', 'a.out~', 'b', '.cronsafe-tmp', '.cronsafe-tmp~', `x~${'0'.repeat(16)}`),
      fc.string({ minLength: 1, maxLength: 6 }).filter((s) => !s.includes('/') && s !== '.' && s !== '..'),
      fc.constantFrom('a'.repeat(252), 'a'.repeat(260), `${'é'.repeat(130)}`),
    );
    const id = fc.array(seg, { minLength: 1, maxLength: 3 }).map((s) => s.join('/'));
    fc.assert(
      fc.property(id, id, (x, y) => {
        const [px, py] = [outputName(x), outputName(y)];
        if (x !== y && px === py) return false;
        // The file of one is never a directory on the other's path.
        if (py.startsWith(`${px}/`) || px.startsWith(`${py}/`)) return false;
        return px.split('/').every((s) => bytes(s) <= NAME_MAX);
      }),
      { numRuns: 3000 },
    );
  });

  it('with source.directory inside output.directory, no output lands in it, and ids stay apart (property)', () => {
    expect(outputName('in/x', sourceInOutput('in'))).toBe('in~/x.out');
    expect(outputName('in~/x', sourceInOutput('in'))).toBe('in~~/x.out');
    expect(outputName('in', sourceInOutput('in'))).toBe('in.out');
    expect(outputName('a/b/x', sourceInOutput('a/b'))).toBe('a/b~/x.out');
    expect(outputName('a/c/x', sourceInOutput('a/b'))).toBe('a/c/x.out');
    const seg = fc.constantFrom('a', 'a~', 'a~~', 'b', 'b~', 'a.out', 'a.out~', '.cronsafe-tmp', 'x');
    const id = fc.array(seg, { minLength: 1, maxLength: 4 }).map((s) => s.join('/'));
    const where = fc.array(fc.constantFrom('a', 'b', 'a~', 'a.out~'), { minLength: 1, maxLength: 3 }).map((s) => s.join('/'));
    fc.assert(
      fc.property(where, id, id, (rel, x, y) => {
        const source = sourceInOutput(rel);
        const [px, py] = [outputName(x, source), outputName(y, source)];
        if (x !== y && px === py) return false;
        if (py.startsWith(`${px}/`) || px.startsWith(`${py}/`)) return false;
        return !px.startsWith(`${rel}/`);
      }),
      { numRuns: 3000 },
    );
  });

  it('commits `a` and `a.out/b` side by side, and a 255-byte name', async () => {
    const store = new OutputStore(out);
    await store.prepare();
    const long = 'n'.repeat(255);
    for (const id of ['a', 'a.out/b', long]) {
      const tmp = given(store, id, 1);
      writeFileSync(tmp, id);
      expect(await store.commit(tmp, id)).toBe(true);
      expect(readFileSync(store.finalPathFor(id), 'utf8')).toBe(id);
    }
    expect(store.outputProblem('a.out/c')).toBeNull();
  });

  it('outputProblem names what is in the way before any handler runs', async () => {
    const store = new OutputStore(out);
    await store.prepare();
    writeFileSync(path.join(out, 'file'), 'x');
    mkdirSync(path.join(out, 'dir.txt.out'));
    expect(store.outputProblem('file/x')).toMatch(/is in the way: it is not a directory/);
    expect(store.outputProblem('dir.txt')).toMatch(/is a directory/);
  });
});

describe("a shared run's start-up sweep and another job's temp directory", () => {
  const old = new Date(Date.now() - 3_600_000);

  it("removes a dead run's stale directory, never a SQLite job's `job-<name>` directory, however old", async () => {
    const root = path.join(out, '.cronsafe-tmp');
    mkdirSync(path.join(root, 'job-transcode'), { recursive: true });
    mkdirSync(path.join(root, 'host_9_run-dead'), { recursive: true });
    writeFileSync(path.join(root, 'host_9_run-dead', 'x.tmp'), 'half');
    // A long attempt of the other job has written nothing yet: nothing in its directory is new.
    for (const d of ['job-transcode', 'host_9_run-dead', 'host_9_run-dead/x.tmp']) utimesSync(path.join(root, d), old, old);
    const store = new OutputStore(out, { run: 'host:1:run-a', staleAfterMs: 60_000 });
    await store.prepare();
    store.close();
    expect(existsSync(path.join(root, 'job-transcode'))).toBe(true);
    expect(existsSync(path.join(root, 'host_9_run-dead'))).toBe(false);
  });

  it('keeps its own directory fresh while it lives, though no attempt starts (one long item)', async () => {
    const store = new OutputStore(out, { run: 'host:1:run-a', staleAfterMs: 400 });
    await store.prepare();
    try {
      utimesSync(store.tempDir, old, old);
      const deadline = Date.now() + 10_000;
      while (statSync(store.tempDir).mtimeMs < Date.now() - 60_000 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(statSync(store.tempDir).mtimeMs).toBeGreaterThan(Date.now() - 60_000);
    } finally {
      store.close();
    }
  });
});
