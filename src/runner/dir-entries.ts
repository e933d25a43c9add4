import type { Dir, Dirent } from 'node:fs';
import { lstat, opendir, stat } from 'node:fs/promises';

/**
 * A Dirent whose name is its bytes as a latin1 string (each byte one character, U+0000 to
 * U+00FF): any name Linux allows, not UTF-8 or not, read back exactly by
 * `Buffer.from(name, 'latin1')`. A Buffer per name (encoding 'buffer') was a separate
 * allocation each: a listing of 100,000 files took 35-50% more CPU (docs/benchmarks.md).
 */
export type NamedDirent = Omit<Dirent, 'name'> & { name: string };

/**
 * What Node's read of a directory throws when it must lstat an entry (its file system gives
 * no entry type) of a listing read as latin1 through a Buffer path: it cannot join the two.
 * The listing is then read again as Buffers, which it can (ListingOptions, entries).
 */
const CANNOT_JOIN = 'ERR_INVALID_ARG_TYPE';

/**
 * Errors of a read of a directory that say its listing changed under it, not that it cannot
 * be read. On a file system whose listings carry no entry types (ext4 made without
 * `filetype`, XFS with `ftype=0`, NFSv3 READDIR, many FUSE file systems), Node lstat()s each
 * entry of a batch inside the read: one entry renamed or removed since the batch was listed
 * (a producer's `rename`, which is normal in a source directory) fails the whole read with
 * ENOENT, and the rest of its batch is lost. ENOTDIR and ELOOP: the directory itself was
 * replaced (by a file, a link) since it was opened.
 */
const CHANGED: ReadonlySet<string> = new Set(['ENOENT', 'ENOTDIR', 'ELOOP']);

/** How many of a directory's entries read last are remembered, to resume its listing past them after such a failure. */
const RECENT = 128;

/** How many times one directory's listing is started again before it is given up for this scan (ListingOptions.onUnfinished). */
const MAX_RESTARTS = 32;

/** Entries per read of the directory stream: few reads on the thread pool, a small buffer. */
const BUFFER_SIZE = 64;

/** Most entries `entries` gives in one array: what one read of the stream holds. */
const CHUNK = BUFFER_SIZE;

/** A directory's identity, to tell it from another one put at its path. */
interface DirId {
  dev: number;
  ino: number;
}

export interface ListingOptions {
  /** The directory's path, as bytes. */
  path: Buffer;
  /** The scan's root: found by stat (it may be reached through a link); any other by lstat (a link swapped in is not followed). */
  root: boolean;
  /**
   * Told when the listing changed so much while it was read that it cannot be resumed
   * without maybe skipping or repeating entries (the entries read last all gone, the
   * directory replaced by another one, MAX_RESTARTS restarts): the entries not read yet are
   * left for the next scan, which the caller must call partial.
   */
  onUnfinished: () => void;
  /**
   * Errors of a read that end this directory's listing as unreadable (onUnreadable) instead
   * of failing the scan. A subdirectory only: the root's still throw.
   */
  unreadable?: ReadonlySet<string>;
  /** Told the code of such an error. */
  onUnreadable?: (code: string) => void;
  /** Ends the listing: also while a restart skips what was given (a whole large directory, maybe). */
  signal?: AbortSignal;
}

/**
 * Opens a directory for `entries`: null when a subdirectory is not a directory (any more) at
 * `path`; throws what opendir throws (ENOTDIR for a root found to be no directory). Names are
 * read as latin1 strings, or with `bytes` as Buffers (for a file system without entry types).
 */
export async function openListing(opts: Omit<ListingOptions, 'onUnfinished'>, bytes = false): Promise<{ dir: Dir; id: DirId } | null> {
  // Node supports 'buffer' here (Dirent names become Buffers); @types/node 20 does not say so.
  const dir = await opendir(opts.path, { bufferSize: BUFFER_SIZE, encoding: bytes ? ('buffer' as BufferEncoding) : 'latin1' });
  // opendir follows links: one swapped in for a subdirectory since its parent was listed
  // (a rename over it) would have the walk list a directory outside the source.
  const st = await (opts.root ? stat : lstat)(opts.path).catch(() => undefined);
  if (!st?.isDirectory()) {
    await dir.close();
    if (opts.root) throw Object.assign(new Error(`ENOTDIR: not a directory: ${opts.path.toString()}`), { code: 'ENOTDIR' });
    return null;
  }
  return { dir, id: { dev: st.dev, ino: st.ino } };
}

/**
 * The entries of a directory opened by openListing, each once, with memory bounded by
 * RECENT whatever the directory's size. A read that fails because an entry vanished mid-read
 * (CHANGED) opens the directory again and goes on past the entries already given: while
 * fewer than RECENT were given, by their names; after, past the last of them that still
 * exists (an anchor), since a directory lists the entries that stay in it in the same order
 * each time it is read (hash or offset order: ext4, XFS, NFS cookies); the names given last
 * are still skipped after the anchor. Entries created meanwhile may or may not be listed, as
 * readdir(3) says of any listing. Closes the directory however it ends.
 *
 * Given in arrays of up to CHUNK entries, in order: one step of this generator (and of the
 * walk's, scan.ts) per array instead of per entry. Each layer of async generator an entry
 * went through cost it a promise and a few microtask turns; there were four, and the
 * scan's allocations were a fifth of a no-op pass's (docs/benchmarks.md). An array holds
 * what one read of the directory stream gave, or less; a listing that ends (or is given up)
 * gives what it holds first.
 */
export async function* entries(opened: { dir: Dir; id: DirId }, opts: ListingOptions): AsyncGenerator<NamedDirent[]> {
  let dir: Dir | null = opened.dir;
  // Read as Buffers (CANNOT_JOIN): names are made latin1 strings here.
  let bytes = false;
  // The names given last (latin1), a ring: `given` of them in all.
  const recent: string[] = [];
  let given = 0;
  // After a restart: skip every entry up to `anchor` (latin1), then those in `seen`.
  const skip: { anchor: string | null; seen: Set<string> | null } = { anchor: null, seen: null };
  let restarts = 0;

  /** Open the directory again and plan the skip; false when the listing cannot be resumed exactly (or it is gone). */
  const restart = async (): Promise<boolean> => {
    await dir?.close().catch(() => undefined);
    dir = null;
    if (++restarts > MAX_RESTARTS) return unfinished();
    let again;
    try {
      again = await openListing(opts, bytes);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? '';
      // Made unreadable since (a chmod, its mount dead): as at the walk's own open.
      if (!opts.root && opts.unreadable?.has(code)) {
        opts.onUnreadable?.(code);
        return false;
      }
      if (!CHANGED.has(code)) throw err;
      again = null;
    }
    // Removed or replaced since: nothing more to list there, as when a subdirectory is gone
    // by the time the walk opens it. The root gone: the pass tells that (sourcePresent); its
    // scan is not complete.
    if (again === null) return opts.root ? unfinished() : false;
    dir = again.dir;
    // Another directory at its path (moved away, another put there): the rest of what was
    // being listed is elsewhere now.
    if (again.id.dev !== opened.id.dev || again.id.ino !== opened.id.ino) return unfinished();
    skip.seen = new Set(recent);
    skip.anchor = null;
    if (given <= RECENT) return true;
    // The newest name given that is still there; the ring's oldest is at given % RECENT.
    for (let i = 1; i <= RECENT; i++) {
      const k = (given - i) % RECENT;
      const there = await lstat(Buffer.concat([opts.path, SLASH, Buffer.from(recent[k]!, 'latin1')])).then(
        () => true,
        (err: unknown) => !CHANGED.has((err as NodeJS.ErrnoException).code ?? ''),
      );
      if (there) {
        skip.anchor = recent[k]!;
        return true;
      }
    }
    return unfinished();
  };
  const unfinished = (): false => {
    opts.onUnfinished();
    return false;
  };

  // The entries read and not given yet.
  let chunk: NamedDirent[] = [];
  try {
    for (;;) {
      let entry: NamedDirent | null;
      try {
        entry = await dir.read();
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code ?? '';
        // A file system without entry types: read again as Buffers, past what was given.
        if (code === CANNOT_JOIN && !bytes) {
          bytes = true;
          if (!(await restart())) break;
          continue;
        }
        // ENAMETOOLONG there: an entry whose path is past PATH_MAX, which Node's lstat of it
        // cannot reach (with entry types, the scan gives it; its attempt is refused).
        if (!opts.root && opts.unreadable?.has(code)) {
          opts.onUnreadable?.(code);
          break;
        }
        if (!CHANGED.has(code)) throw err;
        if (!(await restart())) break;
        continue;
      }
      if (entry === null) {
        // The anchor vanished after it was chosen: choose again.
        if (skip.anchor !== null && (await restart())) continue;
        break;
      }
      if (bytes) entry.name = (entry.name as unknown as Buffer).toString('latin1');
      if (skip.seen !== null) {
        if (opts.signal?.aborted) return;
        const key = entry.name;
        if (skip.anchor !== null) {
          if (key === skip.anchor) skip.anchor = null;
          continue;
        }
        if (skip.seen.has(key)) continue;
      }
      recent[given % RECENT] = entry.name;
      given++;
      chunk.push(entry);
      if (chunk.length >= CHUNK) {
        const full = chunk;
        chunk = [];
        yield full;
      }
    }
    if (chunk.length > 0) yield chunk;
  } finally {
    await (dir as Dir | null)?.close().catch(() => undefined);
  }
}

const SLASH = Buffer.from('/');
