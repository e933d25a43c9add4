import { createRequire } from 'node:module';
import { escapeProblem } from './item-id.js';

// node:crypto costs ~5-10 ms to load, and `cronsafe validate` (which checks a module
// handler's import) reaches this module: loaded at the first name too long to keep whole.
const load = createRequire(import.meta.url);

// Where an item's output goes under output.directory, and which ids may have one: pure
// functions of the id (the output store, the exec handler's temp names and the attempt's
// id check use them).

/** Temp files live inside the output directory: same filesystem, so rename is atomic. */
export const TEMP_DIR_NAME = '.cronsafe-tmp';

/** An exclusive (SQLite) job's temp directory in TEMP_DIR_NAME; job names are DNS labels. */
export const jobTempDir = (job: string): string => `job-${job}`;

/** The job whose temp directory `name` is, or undefined (a shared run's holds a `_`). */
export const jobOfTempDir = (name: string): string | undefined => /^job-([a-z0-9-]+)$/.exec(name)?.[1];
/**
 * Whether `name` is an exclusive job's ledger mark beside its temp directory,
 * `job-<name>.ledger-<16 hex>` (OutputStore.otherLedger): that job's, never a dead run's.
 */
export const isLedgerMark = (name: string): boolean => /^job-[a-z0-9-]+\.ledger-[0-9a-f]{16}$/.test(name);
/** Suffix of every committed output: `<output.directory>/<id>.out`. */
export const OUTPUT_SUFFIX = '.out';

/**
 * Why `id` is not a safe item id, or null when it is. Ids are `/`-separated paths
 * relative to source.directory, names escaped as bytes (item-id.ts); an unsafe one could
 * write outside output.directory or into cronsafe's own temp directory.
 */
export function checkItemId(id: string): string | null {
  if (id === '') return 'empty id';
  if (id.includes('\0')) return 'contains a NUL byte';
  // A backslash only as the scan's escapes (src/runner/item-id.ts): `\\` and `\xHH`.
  const escape = escapeProblem(id);
  if (escape) return escape;
  if (id.startsWith('/')) return 'absolute path';
  // One segment (a flat source directory: the common case) needs no split.
  if (!id.includes('/')) return id === '.' ? 'contains a "." segment' : id === '..' ? 'contains a ".." segment' : null;
  const segments = id.split('/');
  if (segments.includes('')) return 'empty path segment';
  if (segments.includes('.')) return 'contains a "." segment';
  if (segments.includes('..')) return 'contains a ".." segment';
  return null;
}

/** Longest file name Linux file systems take, in bytes (NAME_MAX). */
export const NAME_MAX = 255;
/** `~` + 16 hex digits: the end of a hashed name (before its suffix). */
const HASH_MARK = /~[0-9a-f]{16}$/;
const HASH_LEN = 17;
/** Directory names that would meet an output (`<x>.out`) or our temp directory: see outputName. */
const OUTPUT_LIKE_DIR = /\.out~*$/;
const TEMP_LIKE_DIR = new RegExp(`^${TEMP_DIR_NAME.replace('.', '\\.')}~*$`);

/**
 * One path segment as a name that fits NAME_MAX with `suffix` appended: itself when it
 * fits, else its first characters (whole UTF-8 characters) + `~` + 16 hex digits of the
 * SHA-256 of the whole segment + suffix. A segment that already ends like a hashed name
 * (`~` + 16 hex) is hashed too, so that no name can pose as another's hashed form.
 */
export function safeSegment(seg: string, suffix: string): string {
  const room = NAME_MAX - Buffer.byteLength(suffix);
  if (Buffer.byteLength(seg) <= room && !HASH_MARK.test(seg)) return seg + suffix;
  const hash = (load('node:crypto') as typeof import('node:crypto')).createHash('sha256').update(seg).digest('hex').slice(0, 16);
  let head = '';
  let bytes = 0;
  for (const ch of seg) {
    const n = Buffer.byteLength(ch);
    if (bytes + n > room - HASH_LEN) break;
    head += ch;
    bytes += n;
  }
  return `${head}~${hash}${suffix}`;
}

/**
 * source.directory's place inside output.directory (its relative path's segments), when it
 * is there: outputName then gives the directory that would be the source's own one more
 * `~`, as it does for the temp directory, so that no output is written into the source
 * (over an input of the same name, or as a new item for the next run).
 */
export interface SourceInOutput {
  segments: readonly string[];
  /** The last segment, or it with `~`s after it. */
  last: RegExp;
}

/** SourceInOutput for the source at `rel` (relative to output.directory, `/`-separated; not empty). */
export function sourceInOutput(rel: string): SourceInOutput {
  const segments = rel.split('/');
  const last = segments[segments.length - 1]!.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return { segments, last: new RegExp(`^${last}~*$`) };
}

/**
 * Where an item's output goes, relative to output.directory: `<id>.out`, with two
 * deterministic, documented changes that keep every id's output writable and distinct
 * (pure; the same id always gets the same name):
 *   - a directory segment that ends in `.out` (or `.out~`, `.out~~` ...), or a top-level
 *     one named `.cronsafe-tmp` (or with `~`s after it), gets one more `~`: item `a` writes
 *     the file `a.out`, so item `a.out/b` writes `a.out~/b.out`, never through that file;
 *     and no item writes into cronsafe's temp directory;
 *   - a segment longer than NAME_MAX (with `.out` for the last) is shortened to fit, with
 *     a hash of the whole segment (safeSegment).
 * Files always end in `.out` and directories never do, so no output can need a path that
 * another output's file or directory occupies. With `source` (SourceInOutput), the
 * directory that would be source.directory gets one more `~` in the same way.
 */
export function outputName(id: string, source?: SourceInOutput): string {
  const segs = id.split('/');
  const last = segs.length - 1;
  // Whether the output path so far is the source's path so far (see SourceInOutput).
  let onSourcePath = source !== undefined;
  return segs
    .map((seg, i) => {
      if (i === last) return safeSegment(seg, OUTPUT_SUFFIX);
      let escaped = OUTPUT_LIKE_DIR.test(seg) || (i === 0 && TEMP_LIKE_DIR.test(seg)) ? `${seg}~` : seg;
      if (onSourcePath && source) {
        if (i === source.segments.length - 1) {
          if (source.last.test(escaped)) escaped += '~';
          onSourcePath = false;
        } else onSourcePath = escaped === source.segments[i];
      }
      // Shorten the escaped form: shortening `seg` itself could drop the `~` and give back
      // a `.out` name that an output file takes (a 255-byte `x...x.out` directory).
      return Buffer.byteLength(escaped) > NAME_MAX || HASH_MARK.test(escaped) ? safeSegment(escaped, '') : escaped;
    })
    .join('/');
}
