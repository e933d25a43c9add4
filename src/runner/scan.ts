import { existsSync, lstatSync, realpathSync, statSync } from 'node:fs';
import { stat, statfs } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../config/types.js';
import type { DiscoveredItem } from '../ledger/types.js';
import { directoryFilter, excludeMatcher, includeMatcher } from '../globs.js';
import { climbsOut, whereItIs } from '../real-path.js';
import { entries, openListing } from './dir-entries.js';
import { idFromLatin1, idFromName } from './item-id.js';
import { ownFilePrefixes, ownFiles } from './own-files.js';

const SLASH = Buffer.from('/');

/** Errors of a subdirectory's open that skip it as unreadable (ScanOptions.onUnreadable) instead of failing the scan. */
const UNREADABLE_DIR: ReadonlySet<string> = new Set(['EACCES', 'EPERM', 'ENAMETOOLONG', 'EMFILE', 'ENFILE', 'ENOTCONN', 'ESTALE', 'EIO']);

/** Errors of a path's lookup that say a file system on its way is dead (a FUSE daemon gone, an NFS export removed), not the file. */
const DEAD_MOUNT: ReadonlySet<string> = new Set(['ENOTCONN', 'ESTALE']);
const SLASH_DOT = Buffer.from('/.');

export interface ScanOptions {
  /** Absolute directory to scan. */
  directory: string;
  include: string[];
  exclude: string[];
  /**
   * Absolute paths (directories or files) that are never items: the output directory, the
   * ledger, the lock. Matched by their path below `directory`, as written (lexically).
   */
  skipPaths?: string[];
  /**
   * Absolute paths `<dir>/<beginning>`: a file in `<dir>` whose name begins with
   * `<beginning>` is never an item (the ledger's quota probe, there for a moment:
   * ownFilePrefixes). Matched as skipPaths are, by the path as written and by real paths.
   */
  skipPrefixes?: string[];
  /** stat() every file for size/mtime (needed by `refresh: on-change`); costs a syscall per file. */
  withStats?: boolean;
  signal?: AbortSignal;
  /**
   * Told once per directory below `directory` that cannot be read (EACCES, EPERM, a path
   * past PATH_MAX: ENAMETOOLONG, or no file descriptor left: EMFILE, ENFILE; a dead mount
   * there: ENOTCONN, ESTALE; an I/O error: EIO), at its open or while it is listed (on a file
   * system without entry types, ENAMETOOLONG for a file in it whose path is past PATH_MAX):
   * the scan skips it and goes on, so one bad directory does
   * not stop every item on every run. The pass logs it (a warning with its path), counts
   * it, and calls the scan partial. The root itself being unreadable still throws. Told too
   * (with `changing`) for a directory, the root included, whose listing was cut by entries
   * vanishing mid-read and could not be resumed exactly (dir-entries.ts): read in part.
   */
  onUnreadable?: (dir: UnreadableDirectory) => void;
}

/** A directory the scan skipped because it could not be read. */
export interface UnreadableDirectory {
  /** Absolute path. */
  path: string;
  /** Relative to the scanned directory, `/`-separated (as item ids). */
  id: string;
  /** EACCES, EPERM, ENAMETOOLONG, EMFILE, ENFILE, ENOTCONN, ESTALE or EIO; ENOENT with `changing`. */
  code: string;
  /** A link (matched by the globs) whose target this user cannot reach, not a directory. */
  link?: true;
  /**
   * A directory whose listing was cut by entries vanishing mid-read (a file system without
   * entry types) and could not be resumed exactly (dir-entries.ts): read in part.
   */
  changing?: true;
}

/**
 * Walk `directory` lazily, yielding items as they are found. `opendir` reads entries in
 * small batches and we recurse depth-first with one open handle per level, so memory is
 * bounded by the tree's depth, never by the number of files: a directory of 1,000,000
 * files is never a 1,000,000-element array. Order is the filesystem's (not sorted,
 * because sorting needs a full listing). Dotfiles are not matched by default globs, which
 * conveniently skips the `.name.tmp` files producers write before renaming.
 *
 * Ids are the entries' paths relative to `directory` with each name's bytes escaped by
 * idFromName (src/runner/item-id.ts): any file name Linux allows is an item, and the
 * globs are matched against these ids.
 */
export async function* scanDirectory(opts: ScanOptions): AsyncGenerator<DiscoveredItem> {
  for await (const chunk of scanChunks(opts)) yield* chunk;
}

/**
 * scanDirectory's items in arrays, in the same order: up to one read of a directory's
 * listing per array (dir-entries.ts), never empty. One step of the generators per array
 * instead of per item: what a pass takes them in (batchesOfChunks).
 */
export async function* scanChunks(opts: ScanOptions): AsyncGenerator<DiscoveredItem[]> {
  const globs = opts.include.length > 0 ? opts.include : ['**'];
  const include = includeMatcher(globs);
  // A directory whose files no include glob can match is not entered (`include: ["*.csv"]`
  // never reads a subdirectory): one that cannot be read (lost+found, another user's) made
  // every scan partial, with a warning that its items waited, though it could hold none, and
  // a partial scan never forgets the pending items whose files were deleted; and an archive
  // kept below the source (done/, a million files) was walked on every run for nothing.
  // Likewise a directory named with a leading "." (another job's .cronsafe-tmp, where this
  // one's outputs are its source; a NetApp .snapshot with the whole tree in each copy), which
  // no glob matches into unless it writes that dot (`**` does not), and, with `in/*.csv`,
  // any top-level directory but `in`.
  const mayHoldItems = directoryFilter(globs);
  const exclude = excludeMatcher(opts.exclude);
  const root = path.resolve(opts.directory);
  // Own paths inside the source, as the ids the walk will meet them under: as written, and
  // by real paths too, since a link on either side (the ledger named through a link into
  // the source, or the source through a link) hides them from a lexical match, and the
  // handler would get the live ledger as an item (one that removes its input deletes it).
  // The walk follows no directory links, so real ids below the real root are its ids.
  const realRoot = whereItIs(root);
  const skip = new Set(
    (opts.skipPaths ?? [])
      .flatMap((d) => [path.relative(root, path.resolve(d)), path.relative(realRoot, whereItIs(path.resolve(d)))])
      .filter((rel) => rel !== '' && !climbsOut(rel))
      .map((rel) => rel.split(path.sep).map((seg) => idFromName(Buffer.from(seg, 'utf8'))).join('/')),
  );
  // Beginnings of names of our own short-lived files, as ids: `<dir id>/<beginning>`.
  const skipBeginnings = [
    ...new Set(
      (opts.skipPrefixes ?? []).flatMap((p) => {
        const dir = path.dirname(path.resolve(p));
        const name = idFromName(Buffer.from(path.basename(p), 'utf8'));
        return [path.relative(root, dir), path.relative(realRoot, whereItIs(dir))]
          .filter((rel) => !climbsOut(rel))
          .map((rel) => (rel === '' ? name : `${rel.split(path.sep).map((seg) => idFromName(Buffer.from(seg, 'utf8'))).join('/')}/${name}`));
      }),
    ),
  ];
  const skipByBeginning = (rel: string): boolean => skipBeginnings.some((b) => rel.startsWith(b) && !rel.includes('/', b.length));
  // The same paths by identity: a directory mounted into the source under another path (a
  // bind mount, a volume's subPath) is seen by neither name, and its outputs would become
  // items, a -> out/a.out -> out/out/a.out.out on each run (by the stat each subdirectory
  // gets anyway, below); a link in the source to the ledger or the lock would hand the live
  // file to a handler.
  const own = (opts.skipPaths ?? []).map((p) => identity(p)).filter((id): id is OwnPath => id !== null);
  const ownDirs = own.filter((o) => o.dir);
  // A file of ours with another name (a hard link: a `cp -al` or rsync --link-dest snapshot
  // taken into the source) is known by its identity alone: then each plain file is stat'ed.
  // Else (nearly always) that costs nothing.
  const ownLinked = own.filter((o) => !o.dir && o.links > 1);
  const isOwn = (st: { dev: number; ino: number } | undefined, among: OwnPath[]): boolean =>
    st !== undefined && among.some((o) => o.dev === st.dev && o.ino === st.ino);

  // Names are read as bytes (any byte but '/' and NUL is a legal name), each byte a latin1
  // character (dir-entries.ts), and turned into ids by idFromLatin1; paths are Buffers, built
  // only for the entries that need one.
  async function* walk(absDir: Buffer, relDir: string): AsyncGenerator<DiscoveredItem[]> {
    let opened;
    try {
      // A subdirectory that can be listed but not searched (r without x) would yield items
      // no attempt can open: each would stop its pass, run after run. Unreadable, then. A
      // lookup in it asks, as the attempts will: access(2) would answer for the real uid
      // without capabilities (CAP_DAC_READ_SEARCH). (The root is checked with the config.)
      // `<dir>/.` is the directory itself: one of our own, under another path, is skipped.
      if (relDir !== '' && isOwn(await stat(Buffer.concat([absDir, SLASH_DOT])), ownDirs)) return;
      // Its entry was a directory when the parent was listed, but opendir follows links: one
      // swapped in for it since (a rename over it) is not listed (null). A link in the
      // listing is not followed; one swapped in is not either.
      opened = await openListing({ path: absDir, root: relDir === '' });
      if (opened === null) return;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? '';
      if (relDir === '') throw err;
      // ENAMETOOLONG: its path is past PATH_MAX, so nothing under it can be opened by path
      // (nor handed to a handler): unreadable as surely as EACCES makes it. EMFILE/ENFILE:
      // one handle is open per level, so a tree nested deeper than the open-file limit
      // (`ulimit -n`) cannot be walked to the bottom; failing the scan would stop every
      // item on every run, as one unreadable directory once did.
      // ENOTCONN, ESTALE, EIO: a file system mounted there that is dead (its FUSE daemon
      // gone, an NFS export removed) or a damaged directory: the rest of the source is fine.
      if (UNREADABLE_DIR.has(code)) {
        opts.onUnreadable?.({ path: `${root}/${relDir}`, id: relDir, code });
        return;
      }
      // Removed or replaced by a file since its parent was listed: nothing to scan there. So
      // for a link to itself swapped in (ELOOP): the walk follows no directory link anyway;
      // it ended `cronsafe plan` with `fatal:` and a stack, a run with a raw `ELOOP` line.
      if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP') return;
      throw err;
    }
    const abs = (name: string): Buffer => Buffer.concat([absDir, SLASH, Buffer.from(name, 'latin1')]);
    // An entry that vanishes while its batch is read, on a file system whose listings carry
    // no entry types, does not end the listing (dir-entries.ts); one that changed too much
    // to be resumed exactly leaves its rest for the next scan, which is partial.
    const onUnfinished = (): void => opts.onUnreadable?.({ path: relDir === '' ? root : `${root}/${relDir}`, id: relDir, code: 'ENOENT', changing: true });
    const onUnreadable = (code: string): void => opts.onUnreadable?.({ path: `${root}/${relDir}`, id: relDir, code });
    for await (const chunk of entries(opened, { path: absDir, root: relDir === '', onUnfinished, unreadable: UNREADABLE_DIR, onUnreadable, signal: opts.signal })) {
      // The items of this chunk found so far: given before a subdirectory's, to keep the order.
      let found: DiscoveredItem[] = [];
      for (const entry of chunk) {
        if (opts.signal?.aborted) return;
        const name = idFromLatin1(entry.name);
        const rel = relDir === '' ? name : `${relDir}/${name}`;
        if (entry.isDirectory()) {
          if (skip.has(rel) || exclude(rel) || !mayHoldItems(rel.split('/'))) continue;
          if (found.length > 0) {
            yield found;
            found = [];
          }
          yield* walk(abs(entry.name), rel);
          continue;
        }
        let isFile = entry.isFile();
        let st: { size: number; mtimeMs: number } | undefined;
        if (entry.isSymbolicLink()) {
          // Follow links to files only; links to directories could loop. A link whose target
          // this user cannot reach (EACCES, EPERM on its way) is not gone: it was skipped
          // without a word, and its item never ran. Told as an unreadable directory is. So is
          // one whose target is on a dead mount (ENOTCONN, ESTALE): a complete scan without it
          // forgot its waiting item, charged attempts and all.
          const target = await stat(abs(entry.name)).catch((err: unknown) => {
            const code = (err as NodeJS.ErrnoException).code ?? '';
            if ((code === 'EACCES' || code === 'EPERM' || DEAD_MOUNT.has(code)) && !skip.has(rel) && include(rel) && !exclude(rel)) {
              opts.onUnreadable?.({ path: `${root}/${rel}`, id: rel, code, link: true });
            }
            return undefined;
          });
          isFile = (target?.isFile() ?? false) && !isOwn(target, own);
          st = target;
        }
        if (!isFile || skip.has(rel) || !include(rel) || exclude(rel) || skipByBeginning(rel)) continue;
        if (ownLinked.length > 0 && !st) {
          const file = await stat(abs(entry.name)).catch(() => undefined);
          if (isOwn(file, ownLinked)) continue;
          st = file;
        }
        if (opts.withStats && !st) st = await stat(abs(entry.name)).catch(() => undefined);
        found.push(st ? { id: rel, size: st.size, mtimeMs: Math.trunc(st.mtimeMs) } : { id: rel });
      }
      if (found.length > 0) yield found;
    }
  }

  yield* walk(Buffer.from(root, 'utf8'), '');
}

/** A directory's identity: another dev/ino at the same path later means it is not the same directory. */
export interface SourceId {
  dev: number;
  ino: number;
}

/** The source root's identity now, or null when it is not a directory. */
export async function sourceIdentity(directory: string): Promise<SourceId | null> {
  try {
    const st = await stat(directory);
    return st.isDirectory() ? { dev: st.dev, ino: st.ino } : null;
  } catch {
    return null;
  }
}

/** One of cronsafe's own paths, by identity. */
interface OwnPath extends SourceId {
  dir: boolean;
  /** Its number of names (hard links). */
  links: number;
}

/** The identities of cronsafe's own files (ownFiles) that exist now, for an attempt to tell one swapped in for its item. */
export function ownIdentities(paths: string[]): SourceId[] {
  return paths.map((p) => identity(p)).filter((id): id is OwnPath => id !== null && !id.dir);
}

/** A path's identity (following links), or null when there is nothing there. */
function identity(p: string): OwnPath | null {
  try {
    const st = statSync(p, { throwIfNoEntry: false });
    return st ? { dev: st.dev, ino: st.ino, dir: st.isDirectory(), links: st.nlink } : null;
  } catch {
    return null;
  }
}

/**
 * True while `directory` (the source root) is still a directory and, given `since` (its
 * identity when the pass began), the same one: moved away, or unmounted (a lazy unmount
 * leaves the empty mount point, another directory), it is not. A pass that sees items
 * fail asks, cheaply, to tell a vanished source (stop, charge nothing) from the items'
 * own failures, and from files deleted one by one.
 */
export async function sourcePresent(directory: string, since?: SourceId | null): Promise<boolean> {
  const now = await sourceIdentity(directory);
  if (now === null) return false;
  return !since || (now.dev === since.dev && now.ino === since.ino);
}

/**
 * True when `directory` (the source root) is now another directory than `since`, its
 * identity when the pass began, or none: a root that is a link repointed (a release swap,
 * `ln -sfn releases/B current`), moved away or unmounted. Synchronous, one stat(2): asked
 * before each batch of attempts starts and before each batch of results is written
 * (PassState.rootReplaced), since a root swapped for one with files of the same names fails
 * no attempt (its handlers read the other directory's files under this scan's ids).
 */
export function sourceReplaced(directory: string, since: SourceId | null | undefined): boolean {
  if (!since) return false;
  try {
    const st = statSync(directory, { throwIfNoEntry: false });
    return st === undefined || !st.isDirectory() || st.dev !== since.dev || st.ino !== since.ino;
  } catch {
    return true;
  }
}

/**
 * True when an item's file is gone (ENOENT or ENOTDIR on lstat, or a link to nothing):
 * deleted or replaced by a dangling link between the scan and its attempt. A pass can drop
 * such an item instead of charging it. Synchronous and without an exception on a miss: the
 * pass asks before every attempt.
 */
export function itemGone(file: string | Buffer): boolean {
  // The common answer (still there) from access(2), which builds no Stats object (~2 us of
  // an lstat's result and dates per item); any miss (a dangling link, an unreadable
  // parent) is decided by the lstat below.
  if (existsSync(file)) return false;
  try {
    // A link to nothing is gone too: the scan does not find one (it follows links to files only).
    const st = lstatSync(file, { throwIfNoEntry: false });
    return st === undefined || st.isSymbolicLink();
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOTDIR';
  }
}

/**
 * True when a nested item's directory is no longer where the scan found it: its real path is
 * not `realRoot` plus the item's directory, because a directory on its way was replaced by
 * a link (to elsewhere) since the scan, which follows no directory link. Its handler would
 * read a file outside the source. `directory` is the source as configured (the start of
 * `file`), `realRoot` its real path (realRootOf). False for an item directly in the root, and when the
 * path cannot be resolved (gone, unreadable: the other checks decide those).
 *
 * Asked before every attempt of a nested item: one stat(2) of its directory, and the real
 * path (a syscall per path component) only when that directory resolves to another one than
 * when its real path was last found right (`verified`). A link swapped in anywhere on the way
 * makes the path resolve elsewhere; the same directory moved out and linked back is the one
 * the scan listed.
 */
export function itemBehindLink(directory: string, realRoot: Buffer, file: string | Buffer): boolean {
  const root = directory.endsWith('/') ? directory.replace(/\/+$/, '') : directory;
  const cut = typeof file === 'string' ? file.lastIndexOf('/') : file.lastIndexOf(0x2f);
  if (cut <= (typeof file === 'string' ? root.length : Buffer.byteLength(root, 'utf8'))) return false;
  const dir = typeof file === 'string' ? file.slice(0, cut) : file.subarray(0, cut);
  let st;
  try {
    st = statSync(dir, { throwIfNoEntry: false });
  } catch {
    return false;
  }
  if (st === undefined) return false;
  // Apart, so that a text path and the bytes of another cannot share a key.
  const key = typeof dir === 'string' ? `s${dir}` : `b${dir.toString('latin1')}`;
  const known = verified.get(key);
  if (known !== undefined && known.dev === st.dev && known.ino === st.ino) return false;
  const bytes = typeof dir === 'string' ? Buffer.from(dir, 'utf8') : dir;
  let real: Buffer;
  try {
    real = realpathSync.native(bytes, { encoding: 'buffer' });
  } catch {
    return false;
  }
  const rest = bytes.subarray(Buffer.byteLength(root, 'utf8'));
  if (!real.equals(Buffer.concat([realRoot, rest])) && !belowRootNow(root, realRoot, real, rest)) return true;
  if (verified.size >= VERIFIED_MAX) verified.clear();
  verified.set(key, { dev: st.dev, ino: st.ino });
  return false;
}

/**
 * Whether `real` (an item directory's real path) is `rest` below the root's real path now, when
 * that is no longer `realRoot`: source.directory moved mid-run and a link to it left at its
 * path (`mv queue /vol2/queue && ln -s /vol2/queue queue`). Its items are where they were in
 * it: every nested one was dropped as gone though its file was there. That it is the same
 * directory is the callers' to know (its identity is checked around every attempt,
 * sourceReplaced, and first by whereItWent): a root replaced by another stops the pass.
 */
function belowRootNow(root: string, realRoot: Buffer, real: Buffer, rest: Buffer): boolean {
  const now = realRootOf(root);
  return now !== undefined && !now.equals(realRoot) && real.equals(Buffer.concat([now, rest]));
}

/** Item directories whose real path itemBehindLink found right, with what they resolved to then. */
const verified = new Map<string, SourceId>();
const VERIFIED_MAX = 4096;

/**
 * The source's real path for itemBehindLink, as bytes: reached through a link, it may hold a
 * name that is not UTF-8, which a string would turn into U+FFFD and no item's real path would
 * match. Without its trailing slash ('' for '/'); undefined when it cannot be resolved.
 */
export function realRootOf(directory: string): Buffer | undefined {
  try {
    const real = realpathSync.native(directory, { encoding: 'buffer' });
    return real.length === 1 ? Buffer.alloc(0) : real;
  } catch {
    return undefined;
  }
}

/**
 * The error code when an item's path cannot be reached now (EACCES or EPERM on lstat: a
 * directory on its way was made unreadable since the scan found it), else null. The scan
 * skips such a directory and its files wait; an attempt cannot read them either.
 */
export function itemUnreachable(file: string | Buffer): string | null {
  try {
    lstatSync(file, { throwIfNoEntry: false });
    return null;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'EACCES' || code === 'EPERM' ? code : null;
  }
}

/**
 * ENOTCONN or ESTALE when the file system an item's path is on died since the scan (its FUSE
 * daemon gone, an NFS export removed), else null. Its attempts fail to open the file, while
 * lstat may still answer from the kernel's cache of the names the scan looked up: asked with
 * statfs(2), which goes to the file system. Asynchronous, on a thread: a hung network mount
 * must not stop the event loop (the drain's deadline).
 */
export async function itemMountDead(file: string | Buffer): Promise<string | null> {
  try {
    await statfs(file);
    return null;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    return DEAD_MOUNT.has(code) ? code : null;
  }
}

/**
 * True when an item's path holds something the scan would not take as an item any more: a
 * directory, a FIFO, a socket or a device (itself or behind a link), put there since the
 * scan. Asked by whereItWent: before an attempt whose path is not a regular file now, and
 * after a failure.
 */
export function itemNotAFile(file: string | Buffer): boolean {
  try {
    const st = statSync(file, { throwIfNoEntry: false });
    return st !== undefined && !st.isFile();
  } catch {
    return false;
  }
}

/**
 * Group an async iterable into arrays of `size`, the last one shorter. With `upTo`, each
 * batch after the first is twice the size of the one before, up to `upTo`: the first comes
 * as soon as `size` items did, and a long source goes on in fewer, larger batches.
 */
export async function* batches<T>(source: AsyncIterable<T>, size: number, upTo = size): AsyncGenerator<T[]> {
  const b = new Batcher<T>(size, upTo);
  for await (const item of source) {
    const full = b.add(item);
    if (full) yield full;
  }
  if (b.rest.length > 0) yield b.rest;
}

/** batches of the items of `source`'s arrays (scanChunks), the same sizes as batches gives of them one by one. */
export async function* batchesOfChunks<T>(source: AsyncIterable<T[]>, size: number, upTo = size): AsyncGenerator<T[]> {
  const b = new Batcher<T>(size, upTo);
  for await (const chunk of source) {
    for (const item of chunk) {
      const full = b.add(item);
      if (full) yield full;
    }
  }
  if (b.rest.length > 0) yield b.rest;
}

/** The batch being filled (batches): `add` gives it back once full, and starts the next, twice as large up to `upTo`. */
class Batcher<T> {
  rest: T[] = [];
  #limit: number;
  constructor(
    size: number,
    private readonly upTo: number,
  ) {
    this.#limit = size;
  }

  add(item: T): T[] | undefined {
    this.rest.push(item);
    if (this.rest.length < this.#limit) return undefined;
    const full = this.rest;
    this.rest = [];
    this.#limit = Math.min(this.#limit * 2, this.upTo);
    return full;
  }
}

/**
 * `source`'s values, the next one asked for as soon as one is handed out: a pass reads its
 * next discovery batch from the directory (readdir on libuv's threads, ~16 reads per batch)
 * while it records and sends out this one. Waited for in turn, the claim loop stood idle at
 * every batch's end until the next was read: a third of a 100,000-file pass's wall time on
 * a busy machine (docs/benchmarks.md). At most one value more is held than without it. An
 * error of the read ahead is raised when that value is asked for, as it would have been.
 * Ending early (return, a throw, or `stop`, which ends a wait for a value at once) closes
 * `source` at once when no read is in flight, and otherwise once that read settles, without
 * waiting for it: its value would be thrown away, and a read that hangs (an NFS server gone
 * silent, a dead FUSE daemon) held a stopping pass until the drain's last resort.
 */
export async function* readAhead<T>(source: AsyncIterable<T>, stop?: AbortSignal): AsyncGenerator<T> {
  const it = source[Symbol.asyncIterator]();
  let inFlight = false;
  const ask = (): Promise<IteratorResult<T>> => {
    inFlight = true;
    const p = it.next();
    const settled = (): void => {
      inFlight = false;
    };
    p.then(settled, settled);
    return p;
  };
  let next = ask();
  let done = false;
  try {
    for (;;) {
      const r = await untilStopped(next, stop);
      if (r === STOPPED) return;
      if (r.done) {
        done = true;
        return;
      }
      next = ask();
      // Raised by the await above when its turn comes; until then, no unhandled rejection.
      next.catch(() => undefined);
      yield r.value;
    }
  } finally {
    if (!done) {
      // A source's return waits for its read in flight (an async generator runs one step at a time).
      if (inFlight) void it.return?.(undefined).catch(() => undefined);
      else await it.return?.(undefined);
    }
  }
}

const STOPPED = Symbol('stopped');

/** `p`, or STOPPED as soon as `stop` aborts (at once if it has). */
function untilStopped<T>(p: Promise<T>, stop: AbortSignal | undefined): Promise<T | typeof STOPPED> {
  if (stop === undefined) return p;
  if (stop.aborted) return Promise.resolve(STOPPED);
  let onAbort: (() => void) | undefined;
  const stopped = new Promise<typeof STOPPED>((resolve) => {
    onAbort = () => resolve(STOPPED);
    stop.addEventListener('abort', onAbort, { once: true });
  });
  return Promise.race([p, stopped]).finally(() => stop.removeEventListener('abort', onAbort!));
}

/**
 * The scan of `config.source` as a pass makes it (and `plan` predicts it): cronsafe's own
 * files skipped, stats read when `schedule.refresh: on-change` compares them.
 */
export function scanSource(config: Config, signal: AbortSignal | undefined, onUnreadable: ScanOptions['onUnreadable']): AsyncIterable<DiscoveredItem> {
  return scanDirectory(sourceScan(config, signal, onUnreadable));
}

/** scanSource's items in arrays (scanChunks): what a pass takes them in. */
export function scanSourceChunks(config: Config, signal: AbortSignal | undefined, onUnreadable: ScanOptions['onUnreadable']): AsyncIterable<DiscoveredItem[]> {
  return scanChunks(sourceScan(config, signal, onUnreadable));
}

function sourceScan(config: Config, signal: AbortSignal | undefined, onUnreadable: ScanOptions['onUnreadable']): ScanOptions {
  return {
    directory: config.source.directory,
    include: config.source.include,
    exclude: config.source.exclude,
    skipPaths: ownFiles(config),
    skipPrefixes: ownFilePrefixes(config),
    withStats: config.schedule?.refresh === 'on-change',
    signal,
    onUnreadable,
  };
}
