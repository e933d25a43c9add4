import * as fs from 'node:fs';
import * as path from 'node:path';
import { literalGlob, scanSkipsDirectory } from '../globs.js';
import { COMPANION_SUFFIXES, isLockFileText, isSqliteDatabase, storeFiles } from '../ledger/store-files.js';
import { whereItIs } from '../real-path.js';
import type { KeyProblem } from './messages.js';
import { execSizeProblems } from './exec-size.js';
import { pseudoFilesystem, pseudoFilesystemMessage } from './filesystems.js';
import { programProblem, scriptProblem } from './program.js';
import type { Config } from './types.js';

// Checks of the paths a config names against the file system, at load time: a config that
// can never work fails at once (exit 78), naming the key of each problem.

/**
 * The SQLite ledger's path and the lock's: created on first use when missing, but an
 * existing non-file can never be opened (every command uses the ledger, so always checked).
 * Each key's first problem, reported with the other paths' (load.ts), never alone.
 */
export function stateProblems(c: Config): KeyProblem[] {
  return [ledgerProblem(c), lockProblem(c)].filter((p): p is KeyProblem => p !== null);
}

function ledgerProblem(c: Config): KeyProblem | null {
  const db = c.state.sqlite;
  let s: fs.Stats | undefined;
  try {
    s = db === undefined ? undefined : fs.statSync(db, { throwIfNoEntry: false });
  } catch (err) {
    // A file where a directory of the path must be: no run could ever create the ledger.
    if ((err as NodeJS.ErrnoException).code === 'ENOTDIR') {
      return { key: 'state.sqlite', message: `a parent of the ledger file is not a directory: ${db}` };
    }
    if (db !== undefined && (err as NodeJS.ErrnoException).code !== 'ENAMETOOLONG') return null; // EACCES: the store's own problem, reported with its path when it is opened (exit 1)
  }
  // SQLite and the run keep files named after the ledger beside it (-wal, -shm, -journal,
  // -starts): a name with no room for those suffixes made a ledger file that no run could
  // use (exit 1 at every run; validate crashed on the journal's lstat with a stack trace).
  const tooLong = storeFiles(c.state).find(nameTooLong);
  if (tooLong !== undefined) {
    const what = tooLong === db ? 'the path' : `the path of ${tooLong}, which is kept beside the ledger,`;
    return { key: 'state.sqlite', message: `${what} is too long for the file system (a name over ${NAME_MAX} bytes or a path over ${PATH_MAX - 1}: ENAMETOOLONG); choose a shorter one: ${db}` };
  }
  // Named as a file of another ledger (`<other>-wal`): each run on that one deletes or
  // overwrites it (SQLite removes its write-ahead log when the last connection closes).
  const suffix = db === undefined ? undefined : COMPANION_SUFFIXES.find((x) => db.endsWith(x) && db.length > x.length);
  if (db !== undefined && suffix !== undefined && isSqliteDatabase(db.slice(0, -suffix.length))) {
    return { key: 'state.sqlite', message: `${db} is the name of a file kept beside the ledger ${db.slice(0, -suffix.length)} (its ${suffix.slice(1)} file): each run on that ledger would delete or overwrite it; choose another name` };
  }
  if (db !== undefined && s && !s.isFile()) {
    // A file in it is the fix only for a directory: for a FIFO or a device (`/dev/null`) it named
    // a path below that (`/dev/null/job.db`), which can never be.
    const message = s.isDirectory()
      ? `a directory, expected the ledger file (e.g. ${path.join(db, `${c.name}.db`)}): ${db}`
      : `${s.isFIFO() ? 'a FIFO' : s.isCharacterDevice() ? 'a character device' : s.isBlockDevice() ? 'a block device' : 'a socket'}, not the ledger (a regular file): name a file (e.g. ${path.join(path.dirname(db), `${c.name}.db`)}): ${db}`;
    return { key: 'state.sqlite', message };
  }
  // Only its directory: SQLite creates the file itself through a link to a missing file,
  // unless the link's target is in a directory that is not there (a volume not mounted).
  const dangling = db !== undefined && s === undefined ? (linkToNothingOnTheWay(path.dirname(db)) ?? linkIntoNothing(db)) : null;
  if (dangling !== null) return { key: 'state.sqlite', message: `the ledger file cannot be created: ${dangling}: ${db}` };
  return null;
}

function lockProblem(c: Config): KeyProblem | null {
  // The lock truncates its file and writes its holder into it: on the ledger (or a file
  // SQLite keeps beside it) every run would wipe the ledger, then find its own flock in the
  // way and end as a lock skip, exit 0.
  const lock = whereItIs(c.lock.path);
  const db = c.state.sqlite;
  const clash = storeFiles(c.state).find((f) => whereItIs(f) === lock);
  if (clash !== undefined) {
    const what = clash === db ? 'the ledger file' : `${clash}, a file of the ledger`;
    return { key: 'lock.path', message: `${c.lock.path} is ${what} (state.sqlite): the lock would overwrite it; point lock.path elsewhere` };
  }
  // With PostgreSQL the run lock is an advisory lock: lock.path is never opened, nothing to overwrite.
  const problem = c.state.postgres === undefined ? lockFileProblem(c.lock.path, c.name) : null;
  return problem === null ? null : { key: 'lock.path', message: `${c.lock.path} ${problem}` };
}

/** Linux's longest file name (bytes) and path (bytes, with its NUL), as every local file system takes them. */
const NAME_MAX = 255;
export const PATH_MAX = 4096;

/** A path the kernel refuses with ENAMETOOLONG wherever it points: a name over NAME_MAX bytes, or the whole over PATH_MAX. */
function nameTooLong(p: string): boolean {
  return Buffer.byteLength(p) >= PATH_MAX || p.split('/').some((name) => Buffer.byteLength(name) > NAME_MAX);
}

/**
 * Why no run could ever take its lock at `lockPath`, or null: a link (never written
 * through), a directory or another non-file (the open would fail on every run: exit 1,
 * counted by the Job's backoffLimit), or a file of someone else's data (see foreignLockFile).
 */
function lockFileProblem(lockPath: string, name: string): string | null {
  if (nameTooLong(lockPath)) return `is too long for the file system (a name over ${NAME_MAX} bytes or a path over ${PATH_MAX - 1}: ENAMETOOLONG); choose a shorter one`;
  let st: fs.Stats | undefined;
  try {
    st = fs.lstatSync(lockPath, { throwIfNoEntry: false });
  } catch (err) {
    // A file where a directory of the path must be: no run could ever create the lock.
    if ((err as NodeJS.ErrnoException).code === 'ENOTDIR') return 'cannot be created: a parent of the lock file is not a directory';
    return null; // EACCES: the lock reports it with its path
  }
  if (st === undefined) {
    const dangling = linkToNothingOnTheWay(lockPath);
    return dangling === null ? null : `cannot be created: ${dangling}`;
  }
  if (st.isSymbolicLink()) return 'is a symbolic link: cronsafe never writes through links; remove it or point lock.path elsewhere';
  if (st.isDirectory()) return `is a directory, expected the lock file (e.g. ${path.join(lockPath, `${name}.lock`)})`;
  if (!st.isFile()) return 'is not a regular file (a FIFO, socket or device); point lock.path at a file';
  const foreign = foreignLockFile(lockPath);
  return foreign === null ? null : `holds ${foreign}, not a cronsafe lock: the lock would overwrite it; point lock.path elsewhere (or empty the file)`;
}

/**
 * A description of the data in `lockPath` when it is a file holding something a run did
 * not write (a user's file, named by mistake), or null: missing, empty (flock(1) and
 * `touch` leave it so; blanks only, as `echo > file` does, read as no holder in flock.ts
 * too), a cronsafe holder line, or unreadable (the lock reports that).
 */
function foreignLockFile(lockPath: string): string | null {
  let fd: number | undefined;
  try {
    fd = fs.openSync(lockPath, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
    const st = fs.fstatSync(fd);
    if (!st.isFile() || st.size === 0) return null;
    if (st.size > 512) return `${st.size} bytes`;
    const buf = Buffer.alloc(st.size);
    const text = buf.subarray(0, fs.readSync(fd, buf, 0, buf.length, 0)).toString('utf8');
    return isLockFileText(text) ? null : `${st.size} bytes`;
  } catch {
    return null;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/**
 * Why a missing path can never be made, when that is a link to nothing on its way (the path
 * itself or a parent: a volume reached through a link and not mounted, a link to a
 * directory not made yet): mkdir there fails (EEXIST, ENOENT) on every run. Else null: the
 * nearest entry there is a real directory (or a link to one), and what is missing below it
 * is made on first use.
 */
function linkToNothingOnTheWay(p: string): string | null {
  for (let d = path.resolve(p); ; d = path.dirname(d)) {
    try {
      const st = fs.lstatSync(d, { throwIfNoEntry: false });
      if (st !== undefined) {
        if (!st.isSymbolicLink() || fs.statSync(d, { throwIfNoEntry: false }) !== undefined) return null;
        return `${d} is a symbolic link to ${fs.readlinkSync(d)}, which does not exist`;
      }
    } catch {
      return null; // EACCES, a loop: reported where the path is used
    }
    if (path.dirname(d) === d) return null;
  }
}

/** Why `file`, a link to a missing file, can never be created through: its target's directory is not there. Else null. */
function linkIntoNothing(file: string): string | null {
  try {
    if (!fs.lstatSync(file, { throwIfNoEntry: false })?.isSymbolicLink()) return null;
    const target = fs.readlinkSync(file);
    if (fs.statSync(path.dirname(path.resolve(path.dirname(file), target)), { throwIfNoEntry: false }) !== undefined) return null;
    return `${file} is a symbolic link to ${target}, whose directory does not exist`;
  } catch {
    return null; // EACCES, a loop: reported where the path is used
  }
}

/** The source, the handler's program or module and the output directory: present, of the right kind, apart. */
export function pathProblems(c: Config): KeyProblem[] {
  const problems: KeyProblem[] = [];
  // undefined: not there (yet); null: cannot be reached at all, and said so under `key`.
  const stat = (key: string, p: string): fs.Stats | undefined | null => {
    try {
      return fs.statSync(p, { throwIfNoEntry: false });
    } catch (err) {
      problems.push({ key, message: `${unreachable(err)}: ${p}` });
      return null;
    }
  };

  const src = c.source.directory;
  const s = stat('source.directory', src);
  if (s === undefined) problems.push({ key: 'source.directory', message: `directory not found: ${src}` });
  else if (s !== null && !s.isDirectory()) problems.push({ key: 'source.directory', message: `not a directory: ${src}` });
  else if (s !== null) {
    try {
      // X_OK too: without search permission a readable directory cannot be walked.
      fs.accessSync(src, fs.constants.R_OK | fs.constants.X_OK);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'EACCES';
      problems.push({ key: 'source.directory', message: `directory not readable (${code}): ${src}` });
    }
  }

  const program = c.handler.command?.[0];
  if (program !== undefined) {
    const problem = programProblem(program, src, c.handler.env.PATH ?? process.env.PATH);
    if (problem) problems.push({ key: 'handler.command', message: `cannot run the program: ${problem}` });
    const script = problem ? null : scriptProblem(c.handler.command!, src);
    if (script) problems.push({ key: 'handler.command', message: `cannot run the script: ${script}` });
    problems.push(...execSizeProblems(c.handler.command!, c.handler.env));
  }

  if (c.handler.module !== undefined) {
    const m = stat('handler.module', c.handler.module);
    if (m === undefined) problems.push({ key: 'handler.module', message: `file not found: ${c.handler.module}` });
    else if (m !== null && !m.isFile()) problems.push({ key: 'handler.module', message: `not a file: ${c.handler.module}` });
  }

  // Created on first use when missing; but an existing non-directory can never work.
  const out = c.output && stat('output.directory', c.output.directory);
  if (c.output && out && !out.isDirectory()) {
    problems.push({ key: 'output.directory', message: `not a directory: ${c.output.directory}` });
  }
  const dangling = c.output && out === undefined ? linkToNothingOnTheWay(c.output.directory) : null;
  if (dangling !== null) problems.push({ key: 'output.directory', message: `cannot be created: ${dangling}: ${c.output?.directory}` });
  // `/proc/self`: validate said OK, and every run failed (a `fatal:` stack trace under /proc).
  const pseudo = c.output && (out === undefined || out?.isDirectory()) && dangling === null ? pseudoFilesystem(c.output.directory) : undefined;
  if (pseudo !== undefined) problems.push({ key: 'output.directory', message: pseudoFilesystemMessage(c.output!.directory, pseudo, 'output') });
  if (c.output && s?.isDirectory()) {
    const inside = outputInsideSource(c.source.directory, c.output.directory, c.source.exclude, c.source.include) ?? sourceUnderAnotherPath(s, out, c.output.directory);
    if (inside) problems.push({ key: 'output.directory', message: inside });
  }
  const inTemp = c.output ? inTempDir('output.directory', c.output.directory) : null;
  if (inTemp) problems.push(inTemp);
  const sourceInTemp = inTempDir('source.directory', src);
  if (sourceInTemp) problems.push(sourceInTemp);
  const own = c.output ? ownFileAmongOutputs(c.output.directory, c) : null;
  if (own) problems.push(own);
  const deep = c.output ? tempPathTooLong(c.output.directory, c) : null;
  if (deep) problems.push(deep);
  const readOnly = defaultLedgerOnReadOnlyFs(c);
  if (readOnly) problems.push(readOnly);
  return problems;
}

/**
 * state.sqlite not set, and the default ledger beside the config cannot be created because
 * the config's directory is on a read-only file system (a ConfigMap or Secret volume, a
 * config baked into a read-only image): validate said OK, and every run failed with exit 1
 * (counted toward backoffLimit) on `EROFS ... mkdir '<dir>/.cronsafe'`. Only the default
 * being created: a ledger that exists there is still read by status and dead-letter list,
 * and a state volume set explicitly and remounted read-only is the environment's fault.
 */
function defaultLedgerOnReadOnlyFs(c: Config): KeyProblem | null {
  const db = c.state.sqlite;
  if (db === undefined || !c.state.defaulted || fs.existsSync(db)) return null;
  let dir = path.dirname(db);
  while (!fs.existsSync(dir) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  try {
    fs.accessSync(dir, fs.constants.W_OK);
    return null;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EROFS') return null; // EACCES and the rest: said with the path when the run opens it
  }
  return {
    key: 'state.sqlite',
    message: `not set, and the default ledger ${db} cannot be created: ${dir} is on a read-only file system (a ConfigMap or Secret volume?); set state.sqlite to a file on a writable volume (lock.path goes beside it)`,
  };
}

/** The longest path of a temp file of cronsafe's in its directory (`/<12 hex>.<slot>/<12 hex>-<gen>-<n>.tmp`: OutputStore.tempPathFor). */
const TEMP_FILE_NAME_MAX = 60;
/** A PostgreSQL run's temp directory name: its owner `<hostname>:<pid>:<runId>` (64 + 1 + 7 + 1 + 20 bytes at most). */
const RUN_DIR_NAME_MAX = 93;

/**
 * output.directory deep enough that the paths of cronsafe's temp files in it pass PATH_MAX,
 * though the directory itself does not: the run created it, and every handler failed to
 * create its {output} (ENAMETOOLONG), each item charged until the backlog was dead-lettered.
 */
function tempPathTooLong(output: string, c: Config): KeyProblem | null {
  const own = c.state.postgres === undefined ? Buffer.byteLength(`job-${c.name}`) : RUN_DIR_NAME_MAX;
  const longest = Buffer.byteLength(path.resolve(output)) + `/${TEMP_DIR_NAME}/`.length + own + TEMP_FILE_NAME_MAX;
  if (longest < PATH_MAX) return null;
  return {
    key: 'output.directory',
    message: `is too long: the paths of cronsafe's temp files in it (${TEMP_DIR_NAME}/...) would be up to ${longest} bytes, over what Linux allows (PATH_MAX, ${PATH_MAX - 1}), so no handler could create its {output}; choose a shorter one: ${output}`,
  };
}

/**
 * `at` relative to output.directory (`out`, its stat) when a directory on `at`'s way is
 * output.directory itself under another path (a bind mount, one volume mounted twice: a
 * PVC at both /data/out and /data/state), which real paths cannot see; else null. Before,
 * a ledger at `<state mount>/x.out` was replaced by item x's output.
 */
function underAnotherMount(out: fs.Stats, at: string): string | null {
  for (let dir = path.dirname(at); ; dir = path.dirname(dir)) {
    let st: fs.Stats | undefined;
    try {
      st = fs.statSync(dir, { throwIfNoEntry: false });
    } catch {
      st = undefined;
    }
    if (st !== undefined && st.dev === out.dev && st.ino === out.ino) return path.relative(dir, at);
    if (path.dirname(dir) === dir) return null;
  }
}

// As runner/output-name.ts names them (config does not import the runner).
const TEMP_DIR_NAME = '.cronsafe-tmp';
const OUTPUT_SUFFIX = '.out';

/**
 * The ledger (or a file SQLite keeps beside it) or the lock file where cronsafe itself
 * writes or deletes in output.directory: an output is renamed over `<id>.out`, so an item
 * `x` replaced a ledger named `<out>/x.out` (the run went on on the unlinked file and
 * exited 0; the next found no ledger), and a run empties `<out>/.cronsafe-tmp`, so a
 * ledger kept there was deleted at every start (every item done again, every run). By real
 * paths, so a link on either side cannot hide it. Returns the problem, or null.
 */
function ownFileAmongOutputs(output: string, c: Config): KeyProblem | null {
  const real = whereItIs(output);
  const out = real.endsWith(path.sep) ? real : real + path.sep;
  // With PostgreSQL lock.path is never opened (the run lock is an advisory lock).
  const lock: [string, string][] = c.state.postgres === undefined ? [['lock.path', c.lock.path]] : [];
  const own: [string, string][] = [...storeFiles(c.state).map((f): [string, string] => ['state.sqlite', f]), ...lock];
  let outStat: fs.Stats | undefined;
  try {
    outStat = fs.statSync(output, { throwIfNoEntry: false });
  } catch {
    outStat = undefined; // checkPaths reports what is wrong with it
  }
  for (const [key, p] of own) {
    const at = whereItIs(p);
    const rel = at.startsWith(out) ? at.slice(out.length) : outStat?.isDirectory() ? underAnotherMount(outStat, at) : null;
    if (rel === null) continue;
    const what = p === c.state.sqlite || p === c.lock.path ? p : `${p}, a file of the ledger,`;
    if (rel.split(path.sep)[0] === TEMP_DIR_NAME) {
      return { key, message: `${what} is inside ${path.join(output, TEMP_DIR_NAME)}, cronsafe's temp directory in output.directory, which every run empties: it would be deleted; keep it outside ${TEMP_DIR_NAME}` };
    }
    if (rel.endsWith(OUTPUT_SUFFIX)) {
      return { key, message: `${what} is inside output.directory and ends in ${OUTPUT_SUFFIX}, the name an output takes (<id>.out): the output of an item ${JSON.stringify(rel.slice(0, -OUTPUT_SUFFIX.length).split(path.sep).join('/'))} would replace it; name it otherwise or keep it outside output.directory` };
    }
  }
  return null;
}

/**
 * output.directory or source.directory in an output directory's `.cronsafe-tmp` (cronsafe's
 * own directory there, by real path). An output there: the other job's start-up empties its
 * `job-<name>` directory, so this job's output of an item `job-<name>/x` was deleted while
 * its ledger said done. A source there: the other job's attempts' temp files, half written,
 * were items. Returns the problem, or null.
 */
function inTempDir(key: 'output.directory' | 'source.directory', dir: string): KeyProblem | null {
  const segs = whereItIs(path.resolve(dir)).split(path.sep);
  const i = segs.indexOf(TEMP_DIR_NAME);
  if (i === -1) return null;
  const temp = segs.slice(0, i + 1).join(path.sep);
  const why =
    key === 'output.directory'
      ? 'the runs using it empty their directories there (an output of this job would be deleted)'
      : "its files are other runs' attempts' temp files, half written (they would be items)";
  return { key, message: `is inside ${temp}, cronsafe's own temp directory in an output.directory: ${why}; choose a directory outside ${TEMP_DIR_NAME}: ${dir}` };
}

/** Why a path whose stat failed (other than ENOENT) can never be used. */
function unreachable(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code ?? 'error';
  if (code === 'ENOTDIR') return 'a parent in the path is not a directory';
  if (code === 'ELOOP') return 'the path runs into a loop of symbolic links (ELOOP)';
  if (code === 'EACCES') return 'cannot be reached: a parent directory is not searchable (EACCES)';
  return `cannot be reached (${code})`;
}

/**
 * output.directory that is the source directory itself under another path, which real
 * paths cannot tell: one volume mounted twice (two volumeMounts of one PVC), a bind mount.
 */
function sourceUnderAnotherPath(source: fs.Stats, out: fs.Stats | null | undefined, output: string): string | null {
  if (!out?.isDirectory() || out.dev !== source.dev || out.ino !== source.ino) return null;
  return `${output} is source.directory itself, mounted under another path (a bind mount, or one volume mounted twice): outputs (<id>.out) would become items on the next run (a -> a.out -> a.out.out ...); use a directory outside source.directory`;
}

/**
 * Outputs written inside source.directory become items on the next run (`a` -> `a.out`
 * -> `a.out.out` ...). Allowed only when the scan provably never enters the output
 * directory: `source.exclude` matches its path relative to the source (or a parent's),
 * which is where the scan prunes, or no `source.include` glob can match into it (`*.csv`,
 * a dot directory under `**`), where it prunes too. Compared by real paths, so links on either side do not
 * hide it. The scan's own skip of output.directory by name is not counted as proof: it is
 * lexical, and a link in either path defeats it. Returns the problem, or null.
 */
function outputInsideSource(source: string, output: string, exclude: string[], include: string[]): string | null {
  const src = whereItIs(source);
  const out = whereItIs(output);
  if (out === src) {
    return `${output} is source.directory itself: outputs (<id>.out) would become items on the next run (a -> a.out -> a.out.out ...); use a directory outside source.directory`;
  }
  if (!out.startsWith(src + path.sep)) return null;
  const rel = path.relative(src, out).split(path.sep).join('/');
  // As the scan's id for it (runner/item-id.ts): a backslash in a name is `\\` there, and
  // the exclude is matched against that.
  const id = rel.replaceAll('\\', '\\\\');
  if (scanSkipsDirectory(exclude, id, include)) return null;
  return (
    `${output} is inside source.directory (at ${rel}): outputs would become items on the next run (a -> a.out -> a.out.out ...); ` +
    `move it outside source.directory, or exclude it from the scan: source.exclude: [${JSON.stringify(`${literalGlob(id)}/**`)}]`
  );
}
