import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { batches, batchesOfChunks, readAhead, scanDirectory, sourcePresent, itemGone } from '../../src/runner/scan.js';

const SCAN_TS = fileURLToPath(new URL('../../src/runner/scan.ts', import.meta.url));

function tree(files: string[]): string {
  const root = mkdtempSync(path.join(tmpdir(), 'cronsafe-scan-'));
  for (const f of files) {
    mkdirSync(path.dirname(path.join(root, f)), { recursive: true });
    writeFileSync(path.join(root, f), f);
  }
  return root;
}

async function ids(it: AsyncIterable<{ id: string }>): Promise<string[]> {
  const out: string[] = [];
  for await (const x of it) out.push(x.id);
  return out.sort();
}

describe('scanDirectory', () => {
  it('finds files recursively with /-separated ids relative to the directory', async () => {
    const root = tree(['a.scc', 'd/b.scc', 'd/e/c.txt', 'with space é.scc', 'new\nline.scc']);
    expect(await ids(scanDirectory({ directory: root, include: ['**'], exclude: [] }))).toEqual([
      'a.scc',
      'd/b.scc',
      'd/e/c.txt',
      'new\nline.scc',
      'with space é.scc',
    ]);
  });

  it('applies include and exclude globs, and skips dotfiles (producers’ temp files)', async () => {
    const root = tree(['a.scc', 'd/b.scc', 'd/c.txt', '.a.scc.tmp', 'skip/x.scc']);
    const found = await ids(scanDirectory({ directory: root, include: ['**/*.scc'], exclude: ['skip/**'] }));
    expect(found).toEqual(['a.scc', 'd/b.scc']);
  });

  it('skips dotfiles under a negated extglob too ("all but *.md"), unless the glob names the dot', async () => {
    const root = tree(['a.txt', 'b.md', '.a.txt.tmp', 'd/.rsync.x1', 'd/c.txt', '.hid/e.txt', '.hid/.f', 'g/.keep']);
    // picomatch lets !(...) match a leading dot, which * never does: a producer's
    // `.name.tmp`, still being written, was processed as an item.
    expect(await ids(scanDirectory({ directory: root, include: ['**/!(*.md)'], exclude: [] }))).toEqual(['a.txt', 'd/c.txt']);
    expect(await ids(scanDirectory({ directory: root, include: ['!(b).*'], exclude: [] }))).toEqual(['a.txt']);
    // A dot written in the glob still matches it, and only where it is written.
    expect(await ids(scanDirectory({ directory: root, include: ['.hid/!(x)', '**/.keep'], exclude: [] }))).toEqual(['.hid/e.txt', 'g/.keep']);
    expect(await ids(scanDirectory({ directory: root, include: ['**/.*'], exclude: [] }))).toEqual(['.a.txt.tmp', 'd/.rsync.x1', 'g/.keep']);
  });

  it('takes the dotfiles a brace glob names beside a wildcard ("**/{*,.*}": every file, dotfiles too)', async () => {
    const root = tree(['a.txt', '.env', 'd/.hidden', 'd/c.txt']);
    // `*` matches no leading dot, so a dot this glob matches is the one `.*` writes; the
    // extglob check must not take the `*` alternative's match of "<NUL>env" for a wildcard's.
    const all = ['.env', 'a.txt', 'd/.hidden', 'd/c.txt'];
    expect(await ids(scanDirectory({ directory: root, include: ['**/{*,.*}'], exclude: [] }))).toEqual(all);
    expect(await ids(scanDirectory({ directory: root, include: ['**/{.*,*}'], exclude: [] }))).toEqual(all);
    expect(await ids(scanDirectory({ directory: root, include: ['**/{*.txt,.env}'], exclude: [] }))).toEqual(['.env', 'a.txt', 'd/c.txt']);
  });

  it('skips dotfiles under a brace list ("**/{*.txt,*.md}") as under "**/*.txt"', async () => {
    // picomatch's brace alternatives lose the leading-dot guard: a producer's `.report.txt`,
    // still being written, matched.
    const root = tree(['a.txt', 'b.md', '.a.txt', 'd/.b.md', 'd/c.txt', 'x1.txt']);
    expect(await ids(scanDirectory({ directory: root, include: ['**/{*.txt,*.md}'], exclude: [] }))).toEqual(['a.txt', 'b.md', 'd/c.txt', 'x1.txt']);
    expect(await ids(scanDirectory({ directory: root, include: ['**/{a,x{1..3}}.txt'], exclude: [] }))).toEqual(['a.txt', 'x1.txt']);
  });

  it('never yields cronsafe’s own files (output dir, ledger) that sit inside the source', async () => {
    const root = tree(['a.scc', 'out/a.scc.out', 'state/db']);
    const found = await ids(
      scanDirectory({ directory: root, include: ['**'], exclude: [], skipPaths: [path.join(root, 'out'), path.join(root, 'state/db')] }),
    );
    expect(found).toEqual(['a.scc']);
  });

  it('never yields its own files named through a link into the source, or from a source named through a link', async () => {
    const root = tree(['a.scc', 'state/ledger.db', 'state/ledger.db-wal', 'state/job.lock']);
    const outside = mkdtempSync(path.join(tmpdir(), 'cronsafe-scan-link-'));
    const link = path.join(outside, 'link');
    symlinkSync(root, link);
    // The ledger and the lock named through the link; -shm and -starts do not exist yet.
    const viaLink = ['ledger.db', 'ledger.db-wal', 'ledger.db-shm', 'ledger.db-starts', 'job.lock'].map((f) => path.join(link, 'state', f));
    expect(await ids(scanDirectory({ directory: root, include: ['**'], exclude: [], skipPaths: viaLink }))).toEqual(['a.scc']);
    // The source named through the link, the ledger by its real path.
    const real = ['ledger.db', 'ledger.db-wal', 'job.lock'].map((f) => path.join(root, 'state', f));
    expect(await ids(scanDirectory({ directory: link, include: ['**'], exclude: [], skipPaths: real }))).toEqual(['a.scc']);
  });

  it('follows symlinks to files but not to directories (no loops)', async () => {
    const root = tree(['real/a.scc']);
    symlinkSync(path.join(root, 'real/a.scc'), path.join(root, 'link.scc'));
    symlinkSync(root, path.join(root, 'real/loop'));
    expect(await ids(scanDirectory({ directory: root, include: ['**'], exclude: [] }))).toEqual(['link.scc', 'real/a.scc']);
  });

  it('does not follow a subdirectory swapped for a link (out of the source) after its parent was listed', async () => {
    // Both subdirectories are in the root's first listing batch; the one the walk has not
    // entered yet is replaced by a link to a directory outside the source meanwhile.
    const root = tree(['a/one.txt', 'b/one.txt']);
    const outside = tree(['secret.txt']);
    const gen = scanDirectory({ directory: root, include: ['**'], exclude: [] });
    const first = await gen.next();
    const entered = (first.value as { id: string }).id.split('/')[0]!;
    const other = entered === 'a' ? 'b' : 'a';
    renameSync(path.join(root, other), path.join(root, `${other}-moved`));
    symlinkSync(outside, path.join(root, other));
    const rest: string[] = [];
    for await (const x of gen) rest.push(x.id);
    expect(rest).not.toContain(`${other}/secret.txt`);
    expect(rest).toEqual([]);
  });

  it('reports size and mtime when asked', async () => {
    const root = tree(['a.scc']);
    const [item] = await (async () => {
      const out = [];
      for await (const x of scanDirectory({ directory: root, include: ['**'], exclude: [], withStats: true })) out.push(x);
      return out;
    })();
    expect(item).toMatchObject({ id: 'a.scc', size: 5 });
    expect(item!.mtimeMs).toBeGreaterThan(0);
  });

  it('is lazy: the consumer controls the pace (nothing read past what was asked for)', async () => {
    const root = tree(Array.from({ length: 500 }, (_, i) => `f${i}.scc`));
    const gen = scanDirectory({ directory: root, include: ['**'], exclude: [] });
    const first = await gen.next();
    expect(first.done).toBe(false);
    await gen.return(undefined);
    const again = await gen.next();
    expect(again.done).toBe(true);
  });
});

describe('batches', () => {
  it('groups into arrays of at most n, keeping the remainder', async () => {
    async function* gen() {
      for (let i = 0; i < 7; i++) yield i;
    }
    const out: number[][] = [];
    for await (const b of batches(gen(), 3)) out.push(b);
    expect(out).toEqual([[0, 1, 2], [3, 4, 5], [6]]);
  });

  it('with upTo, doubles each batch after the first up to it; every item once, in order', async () => {
    async function* gen(n: number) {
      for (let i = 0; i < n; i++) yield i;
    }
    const sizes = async (n: number, size: number, upTo: number): Promise<number[]> => {
      const out: number[][] = [];
      for await (const b of batches(gen(n), size, upTo)) out.push(b);
      expect(out.flat()).toEqual([...Array(n).keys()]);
      return out.map((b) => b.length);
    };
    expect(await sizes(40, 2, 8)).toEqual([2, 4, 8, 8, 8, 8, 2]);
    expect(await sizes(5, 2, 8)).toEqual([2, 3]);
    expect(await sizes(0, 2, 8)).toEqual([]);
    expect(await sizes(10, 3, 3)).toEqual([3, 3, 3, 1]);
  });

  it('batchesOfChunks gives the batches batches gives, however the items come in arrays', async () => {
    async function* gen(n: number) {
      for (let i = 0; i < n; i++) yield i;
    }
    async function* chunked(n: number, lengths: number[]) {
      for (let i = 0, k = 0; i < n; k++) {
        const len = Math.min(lengths[k % lengths.length]!, n - i);
        yield Array.from({ length: len }, (_, j) => i + j);
        i += len;
      }
    }
    const all = async <T>(it: AsyncIterable<T>): Promise<T[]> => {
      const out: T[] = [];
      for await (const x of it) out.push(x);
      return out;
    };
    for (const lengths of [[1], [64], [5, 1, 13], [100]]) {
      for (const n of [0, 1, 7, 40, 301]) {
        expect(await all(batchesOfChunks(chunked(n, lengths), 2, 16))).toEqual(await all(batches(gen(n), 2, 16)));
      }
    }
    // An empty array gives nothing.
    expect(await all(batchesOfChunks((async function* () { yield []; yield [1]; yield []; })(), 2))).toEqual([[1]]);
  });
});

describe('readAhead', () => {
  it('asks for the next value as one is handed out, every value once, in order', async () => {
    const asked: number[] = [];
    async function* gen() {
      for (let i = 0; i < 4; i++) {
        asked.push(i);
        yield i;
      }
    }
    const got: number[] = [];
    for await (const v of readAhead(gen())) {
      await new Promise((r) => setImmediate(r));
      // While this value is worked on, the next one has been asked for already.
      expect(asked).toContain(Math.min(v + 1, 3));
      got.push(v);
    }
    expect(got).toEqual([0, 1, 2, 3]);
  });

  it('raises the source\'s error when its value is asked for, after the values before it', async () => {
    async function* gen() {
      yield 1;
      throw new Error('unreadable');
    }
    const got: number[] = [];
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown) => unhandled.push(e);
    process.on('unhandledRejection', onUnhandled);
    try {
      await expect(
        (async () => {
          for await (const v of readAhead(gen())) {
            await new Promise((r) => setImmediate(r));
            got.push(v);
          }
        })(),
      ).rejects.toThrow('unreadable');
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    expect(got).toEqual([1]);
    expect(unhandled).toEqual([]);
  });

  it('closes the source when the consumer stops early', async () => {
    let closed = false;
    async function* gen() {
      try {
        for (let i = 0; ; i++) yield i;
      } finally {
        closed = true;
      }
    }
    for await (const v of readAhead(gen())) if (v === 2) break;
    expect(closed).toBe(true);
  });
});

describe('scanDirectory: unreadable and vanished directories', () => {
  it('skips an unreadable subdirectory, reports it once, and yields the rest', () => {
    const root = tree(['a.scc', 'locked/x.scc', 'locked/deeper/y.scc', 'z/b.scc']);
    chmodSync(path.join(root, 'locked'), 0o000);
    // Root reads anything: scan as "nobody" in a child, so that EACCES is real.
    const asRoot = process.getuid?.() === 0;
    if (asRoot) for (const d of [root, path.join(root, 'z')]) chownSync(d, 65534, 65534);
    const script = `import { scanDirectory } from ${JSON.stringify(pathToFileURL(SCAN_TS).href)};
      const skipped = [];
      const ids = [];
      for await (const x of scanDirectory({ directory: ${JSON.stringify(root)}, include: ['**'], exclude: [], onUnreadable: (d) => skipped.push(d) })) ids.push(x.id);
      console.log(JSON.stringify({ ids: ids.sort(), skipped }));`;
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      encoding: 'utf8', timeout: 30_000, cwd: path.dirname(SCAN_TS), ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
    });
    chmodSync(path.join(root, 'locked'), 0o755);
    expect(child.status, child.stderr).toBe(0);
    expect(JSON.parse(child.stdout)).toEqual({
      ids: ['a.scc', 'z/b.scc'],
      skipped: [{ path: path.join(root, 'locked'), id: 'locked', code: 'EACCES' }],
    });
  });

  it('reports a link whose target this user cannot reach, instead of skipping it without a word', () => {
    const root = tree(['a.scc', 'hidden/x.scc']);
    symlinkSync(path.join(root, 'hidden', 'x.scc'), path.join(root, 'link.scc'));
    symlinkSync(path.join(root, 'hidden', 'x.scc'), path.join(root, 'link.txt')); // not matched: not told
    chmodSync(path.join(root, 'hidden'), 0o000);
    const asRoot = process.getuid?.() === 0;
    if (asRoot) chownSync(root, 65534, 65534);
    const script = `import { scanDirectory } from ${JSON.stringify(pathToFileURL(SCAN_TS).href)};
      const skipped = [];
      const ids = [];
      for await (const x of scanDirectory({ directory: ${JSON.stringify(root)}, include: ['**/*.scc'], exclude: [], onUnreadable: (d) => skipped.push(d) })) ids.push(x.id);
      console.log(JSON.stringify({ ids: ids.sort(), skipped: skipped.sort((a, b) => a.id.localeCompare(b.id)) }));`;
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      encoding: 'utf8', timeout: 30_000, cwd: path.dirname(SCAN_TS), ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
    });
    chmodSync(path.join(root, 'hidden'), 0o755);
    expect(child.status, child.stderr).toBe(0);
    expect(JSON.parse(child.stdout)).toEqual({
      ids: ['a.scc'],
      skipped: [
        { path: path.join(root, 'hidden'), id: 'hidden', code: 'EACCES' },
        { path: path.join(root, 'link.scc'), id: 'link.scc', code: 'EACCES', link: true },
      ],
    });
  });

  it('skips a subtree nested deeper than the open-file limit allows (EMFILE) instead of failing the whole scan', () => {
    // One directory handle is open per level: 150 levels under `ulimit -n 100`.
    const root = tree(['a.scc', 'z/b.scc', `${Array.from({ length: 150 }, () => 'd').join('/')}/deep.scc`]);
    const script = `import { scanDirectory } from ${JSON.stringify(pathToFileURL(SCAN_TS).href)};
      const skipped = [];
      const ids = [];
      for await (const x of scanDirectory({ directory: ${JSON.stringify(root)}, include: ['**'], exclude: [], onUnreadable: (d) => skipped.push(d) })) ids.push(x.id);
      console.log(JSON.stringify({ ids: ids.sort(), codes: skipped.map((d) => d.code) }));`;
    const child = spawnSync('sh', ['-c', 'ulimit -n 100 && exec "$0" --import tsx --input-type=module -e "$1"', process.execPath, script], {
      encoding: 'utf8',
      timeout: 30_000,
      cwd: path.dirname(SCAN_TS),
    });
    expect(child.status, child.stderr).toBe(0);
    const found = JSON.parse(child.stdout) as { ids: string[]; codes: string[] };
    expect(found.ids).toEqual(['a.scc', 'z/b.scc']);
    expect(found.codes).toEqual(['EMFILE']);
  });

  it('tells a present source root and item from vanished ones', async () => {
    const root = tree(['a.scc']);
    expect(await sourcePresent(root)).toBe(true);
    expect(await sourcePresent(path.join(root, 'nope'))).toBe(false);
    expect(await sourcePresent(path.join(root, 'a.scc'))).toBe(false); // a file is not a source
    expect(itemGone(path.join(root, 'a.scc'))).toBe(false);
    expect(itemGone(path.join(root, 'b.scc'))).toBe(true);
    expect(itemGone(path.join(root, 'a.scc', 'x'))).toBe(true); // ENOTDIR
  });
});
