import { createHash, randomBytes } from 'node:crypto';
import { accessSync, closeSync, constants, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, rmdirSync, statfsSync, statSync, utimesSync, type Stats, type StatsFs } from 'node:fs';
import { access, mkdir, open, rename, rmdir, statfs, unlink, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { blockRefused, PROBE_BLOCK } from '../block-probe.js';
import { errorCode } from '../errors.js';
import { chmodSame, ensureOwnDir, ownDirProblem, ownerRightsBack, sameDir, UnsafeOwnDirectory, type DirId } from './own-dir.js';
import { crossDevice, EnvironmentFault, OutputMaybeCut, OutputUnwritable, OwnDirectoryGone, fileSystemRefused, syncRefused, targetRefused, writeRefused } from './faults.js';
import { fsyncPath, realBirthTimes } from './output-fs.js';
import { checkItemId, jobOfTempDir, jobTempDir, outputName, sourceInOutput, TEMP_DIR_NAME, type SourceInOutput } from './output-name.js';
import { namedAsPath, outputPathProblem, pinOutputPlace } from './output-path.js';
import { removeTempLeftovers } from './temp-leftovers.js';
import { removeTree } from './remove-tree.js';
import { flockSync } from '../flock.js';
import { DIR_MODE, makeDirs } from '../make-dirs.js';
import { whereItIs } from '../real-path.js';

/**
 * How far the kernel's file-time clock (coarse: one tick, 10 ms at HZ=100) may lag the
 * clock that stamped a claim, for committedSince.
 */
const BIRTH_CLOCK_SLACK_MS = 20;

export { UnsafeOwnDirectory } from './own-dir.js';
export { OutputPathError } from './output-path.js';
export { OwnDirectoryGone } from './faults.js';

/**
 * The job's temp directory `.cronsafe-tmp/job-<name>` is held by another process: a run of
 * a config of the same name on another ledger (its run lock is apart from ours).
 */
export class TempDirInUse extends Error {
  override name = 'TempDirInUse';
  constructor(readonly tempDir: string) {
    super(`${tempDir} is held by another run`);
  }
}

/** The attempt's own directory of its temp path (`<tempDir>/<slot>/<name>.tmp`: OutputStore.tempPathFor). */
const attemptDirOf = (tempPath: string): string => tempPath.slice(0, tempPath.lastIndexOf('/'));

/** How often a shared run's temp directory is touched, at most: below any run's staleness (>= 60 s). */
const KEEP_FRESH_MS = 20_000;

/** More recreations of the temp directory than this in one run: the environment is broken. */
const MAX_TEMP_RECREATIONS = 200;

/**
 * With many runs at once on one output directory (the PostgreSQL ledger's pods), each
 * run's temp files live in `.cronsafe-tmp/<run>/`, and prepare() removes only the other
 * runs' directories that nothing has touched for `staleAfterMs` (a killed run's leftovers).
 */
export interface SharedTempOptions {
  /** This run's owner token; its directory name is made from it. */
  run: string;
  /**
   * Older than this, another run's temp directory is dead. Must exceed the longest an
   * attempt can take (handler timeout + kill grace): a live run touches its directory at
   * least every quarter of it while it starts attempts.
   */
  staleAfterMs: number;
}

/** How long a sample of the output file system's free space serves attempts' starts (OutputStore.freeAtStart). */
const FREE_SAMPLE_MS = 250;

/** The start of the name of the mark of the ledger the job's last run here was on (OutputStore.otherLedger). */
const LEDGER_MARK = '.ledger-';

/**
 * Outputs keyed by item id, written atomically: a handler writes a temp file, and only
 * a successful attempt renames it to `<outDir>/<id>.out`. A redo overwrites the same
 * name, never duplicates; a killed run leaves only temp files, which prepare() removes.
 */
export class OutputStore {
  /** Absolute output directory. */
  readonly dir: string;
  /** Absolute temp directory inside `dir`. */
  readonly tempDir: string;
  /** `<dir>/.cronsafe-tmp` (= tempDir unless shared). */
  readonly #root: string;

  #lastTouch = 0;
  #keepFresh: NodeJS.Timeout | undefined;
  /** This job's name: an exclusive run's temp directory is `.cronsafe-tmp/job-<job>`; any other `job-*` is another job's. */
  readonly #job: string | undefined;
  /** Other jobs with a temp directory here (sharedWith), once asked. */
  #others: string[] | undefined;
  /** Temp names: one random prefix per store (per run) and a counter, no syscall or hash per item. */
  readonly #prefix = randomBytes(6).toString('hex');
  #counter = 0;
  /** Attempt directories (`<tempDir>/<prefix>.<k>`) free for the next attempt: one per attempt running at once, reused. */
  readonly #freeSlots: string[] = [];
  #slots = 0;
  /** The attempt directories made in this generation of the temp directory, with their identity as made. */
  readonly #madeSlots = new Map<string, DirId>();
  /** The attempt directory each attempt's temp path is in, while the attempt holds it. */
  readonly #slotOf = new Map<string, string>();
  /** How many attempt directories were found gone as their attempt ended (#releaseSlot). */
  #slotLosses = 0;
  /** Refuse to commit an output another process still has open for writing (a command handler's setsid writer). */
  detachedWriters = false;
  /** Outputs this store committed (#fullNow). */
  #committed = 0;
  /** The temp directory as prepare() made it: another inode later means it was removed. */
  #tempId: DirId | undefined;
  /**
   * How many times the temp directory was found gone and recreated. It is in every temp
   * name, so that each attempt whose directory was replaced under it is told so, not only
   * the first to notice (the others would otherwise be charged for the cleaner's doing).
   */
  #gen = 0;
  /** The job's temp directory, open and flocked while this run uses it (exclusive runs). */
  #jobLock: number | undefined;
  /** Whether birth times are real here (realBirthTimes), once asked. */
  #realBirthTimes: boolean | undefined;
  /** output.directory itself (followed if a link) as prepare() found it. */
  #outId: DirId | undefined;
  /** Owner of `dir`, trusted for our directories in it too (see ensureOwnDir). */
  #dirUid: number | undefined;
  /** source.directory's place inside `dir`, when it is there (outputName keeps outputs out of it). */
  readonly #source: SourceInOutput | undefined;
  /** Exclusive runs: the ledger file, recorded beside the job's temp directory (see otherLedger). */
  readonly #ledger: string | undefined;
  /** Whether the last run of this name here was on another ledger, once prepare() read it. */
  #otherLedger = false;
  /** The same, read by committedSince (crash recovery comes before prepare()), once asked. */
  #otherLedgerBefore: boolean | undefined;
  /** The last statfs of the output file system's free space (freeAtStart). */
  #freeSample: { at: number; bytes: number } | undefined;

  /**
   * @param shared many runs at once on this directory (PostgreSQL pods): a directory per run.
   * @param job exclusive runs (SQLite): the job's name; its temp files live in
   *   `.cronsafe-tmp/<job>/`, the only directory its start-up empties, so that two jobs that
   *   share an output directory never delete each other's attempts. Neither: the temp
   *   directory itself (one job alone on the directory). With `shared`, only what sharedWith
   *   is told: which `job-*` directory is not another job's.
   * @param sourceDir source.directory: when it is inside the output directory, no output is
   *   written into it (outputName's SourceInOutput).
   */
  constructor(
    outDir: string,
    private readonly shared?: SharedTempOptions,
    job?: string,
    sourceDir?: string,
    ledger?: string,
  ) {
    this.dir = path.resolve(outDir);
    this.#root = path.join(this.dir, TEMP_DIR_NAME);
    if (shared) this.tempDir = path.join(this.#root, shared.run.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 200));
    // Job names are DNS labels: never a sanitised run owner (those hold '_').
    else this.tempDir = job ? path.join(this.#root, jobTempDir(job)) : this.#root;
    this.#job = job;
    this.#ledger = ledger === undefined ? undefined : whereItIs(path.resolve(ledger));
    // Real paths: a link on either side must not hide the source's place.
    const rel = sourceDir === undefined ? '' : path.relative(whereItIs(this.dir), whereItIs(path.resolve(sourceDir)));
    this.#source = rel === '' || rel === '..' || rel.startsWith(`..${path.sep}`) || path.isAbsolute(rel) ? undefined : sourceInOutput(rel.split(path.sep).join('/'));
  }

  /**
   * The other jobs that have run on this output directory (their `.cronsafe-tmp/job-<name>`
   * stays), or on one that holds it (real paths): outputs are keyed by item id alone, so an
   * id two jobs both have is one file, and so is our `x` and the item `sub/x` of a job whose
   * output directory is our parent. Exclusive (SQLite) jobs are told by name, also by a
   * PostgreSQL job; a PostgreSQL job's run directories cannot be told from this pass's.
   */
  sharedWith(): string[] {
    if (this.#job === undefined) return [];
    if (this.#others === undefined) {
      const names = new Set<string>();
      for (let dir = whereItIs(this.dir); ; dir = path.dirname(dir)) {
        try {
          for (const j of readdirSync(path.join(dir, TEMP_DIR_NAME)).map(jobOfTempDir)) if (j !== undefined && j !== this.#job) names.add(j);
        } catch {
          // No temp directory there: no job has run on it.
        }
        if (path.dirname(dir) === dir) break;
      }
      this.#others = [...names].sort();
    }
    return this.#others;
  }

  /**
   * Whether a directory between output.directory and the output `final` holds a
   * `.cronsafe-tmp`: another job's output directory inside ours, whose item `x` writes our
   * `sub/x`'s output (sharedWith cannot list those without walking the whole tree).
   */
  #nestedOutputDir(final: string): boolean {
    for (let dir = path.dirname(final); dir.length > this.dir.length; dir = path.dirname(dir)) {
      if (lstatSync(path.join(dir, TEMP_DIR_NAME), { throwIfNoEntry: false }) !== undefined) return true;
    }
    return false;
  }

  /**
   * Create the directories and remove temp files a killed run left behind. Without
   * `shared`, everything in the temp directory: only safe while holding an exclusive run
   * lock. With it, other runs' entries untouched for `staleAfterMs`. Throws
   * UnsafeOwnDirectory (deleting nothing) when the temp directory is not our own real
   * directory: a symlink there would make "empty the temp directory" empty its target.
   */
  async prepare(): Promise<void> {
    try {
      await this.#prepare();
    } catch (err) {
      throw this.#changedDuringPrepare(err) ?? this.#refusedDuringPrepare(err) ?? err;
    }
  }

  /**
   * A look, mkdir, write or removal of prepare()'s refused by the user's rights or the file
   * system (read-only, full, over quota): one line naming the path, as for a bug it ended the
   * run with `cronsafe: fatal:` and a stack. Also past the first checks: an ext4 gone
   * read-only after an error, whose access(2) and statfs still say read-write, refused the
   * removal of a killed run's leftovers. Null for anything else.
   */
  #refusedDuringPrepare(err: unknown): OutputUnwritable | null {
    if (err instanceof OutputUnwritable) return null;
    const what = `create or write in ${(err as NodeJS.ErrnoException).path ?? this.tempDir}`;
    const refused = writeRefused(err, what) ?? fileSystemRefused(err, what, this.dir);
    return refused === null ? null : new OutputUnwritable(refused);
  }

  /**
   * output.directory removed, or replaced by a file, while prepare() worked in it (a daemon's
   * pass that started as someone ran `rm -r out; cp report out`): a look or mkdir there then
   * failed with ENOENT, ENOTDIR or EEXIST (ELOOP: replaced by a link to itself), which ended a daemon with `cronsafe: fatal:` and a
   * stack. prepare() makes all it looks at, so such an error there is the environment's
   * fault, said in one line as a file found there from the start is. Null when `err` is not
   * that (another code, or a path outside output.directory).
   */
  #changedDuringPrepare(err: unknown): OutputUnwritable | null {
    const code = errorCode(err);
    if (err instanceof OutputUnwritable || (code !== 'ENOTDIR' && code !== 'ENOENT' && code !== 'EEXIST' && code !== 'ELOOP')) return null;
    const at = (err as NodeJS.ErrnoException).path;
    if (at !== undefined && at !== this.dir && !at.startsWith(this.dir.endsWith(path.sep) ? this.dir : this.dir + path.sep)) return null;
    let now: Stats | undefined;
    try {
      now = statSync(this.dir, { throwIfNoEntry: false });
    } catch {
      now = undefined; // a link on its way made a loop, or a file: not there as a directory
    }
    if (now !== undefined && !now.isDirectory()) return new OutputUnwritable(`output.directory is not a directory: ${this.dir}`);
    return new OutputUnwritable(`output.directory ${this.dir} was removed or replaced while cronsafe made its directories there (${code}${at === undefined ? '' : ` at ${at}`}): the pass did not start; run again`);
  }

  /** prepare() itself; what it throws is told apart by the two above. */
  async #prepare(): Promise<void> {
    // The configured directory itself may be a link (the user's choice); below it, nothing may.
    // Checked with the config, but a daemon's later passes find what is there now.
    if (statSync(this.dir, { throwIfNoEntry: false })?.isDirectory() === false) throw new OutputUnwritable(`output.directory is not a directory: ${this.dir}`);
    makeDirs(this.dir);
    const out = statSync(this.dir);
    this.#dirUid = out.uid;
    this.#outId = { dev: out.dev, ino: out.ino };
    // Ours: a mode a handler left there (its {output}'s directory made read-only) is undone,
    // the root's first (without search right in it, its job's directory cannot be looked at).
    const root = this.#own(this.#root);
    ownerRightsBack(this.#root);
    this.#tempId = this.tempDir === this.#root ? root : this.#own(this.tempDir);
    if (this.tempDir !== this.#root) ownerRightsBack(this.tempDir);
    // Ours by owner, but perhaps made by the output directory's owner (the trusted uid) as
    // another user than this run's (a changed runAsUser): every handler would fail to
    // write its {output} there, and be charged for it.
    accessSync(this.tempDir, constants.W_OK | constants.X_OK);
    // Each commit syncs the output's directory after the rename, which needs it open for
    // reading: in a drop box (mode 0733, another user's) every output was renamed into place
    // and then its item charged for the refused sync, until all were dead-lettered.
    try {
      closeSync(openSync(this.dir, constants.O_RDONLY | constants.O_DIRECTORY));
    } catch (err) {
      const refused = syncRefused(err, this.dir);
      throw refused === null ? err : new OutputUnwritable(refused);
    }
    if (this.#job !== undefined && !this.shared) {
      this.#lockJobDir();
      this.#otherLedger = this.#readLedgerMark();
    }
    if (this.shared) {
      this.#lastTouch = Date.now();
      // Fresh while we live, even when no attempt starts for a while (one long item):
      // another job's runs may judge it stale after their own staleAfterMs, at least 60 s.
      clearInterval(this.#keepFresh);
      this.#keepFresh = setInterval(() => {
        try {
          this.#touch();
        } catch {
          // Gone: the next attempt's tempPathFor recreates it (and says so).
        }
      }, Math.min(this.shared.staleAfterMs / 4, KEEP_FRESH_MS));
      this.#keepFresh.unref();
    }
    await removeTempLeftovers({ root: this.#root, rootId: root, tempDir: this.tempDir, tempId: this.#tempId, staleAfterMs: this.shared?.staleAfterMs });
    if (this.#job !== undefined && !this.shared) this.#writeLedgerMark();
  }

  /**
   * Whether the last exclusive run of this job's name on this output directory ran on
   * another ledger file: two configs of one name (a copy in another directory, each with its
   * default ledger) write here, so an id they both have is one output, the last commit
   * winning, and each ledger counts it done; nothing else tells them apart (sharedWith knows
   * jobs by name, the flock only runs at the same time).
   */
  otherLedger(): boolean {
    return this.#otherLedger;
  }

  /**
   * The mark: an empty directory `job-<name>.ledger-<hash of the ledger's real path>` beside
   * the job's temp directory (a directory: a run leaves no file in .cronsafe-tmp; beside it:
   * each start empties the job's own). The job's other marks go when ours is made.
   */
  #ledgerMark(): string | undefined {
    return this.#ledger === undefined ? undefined : `${this.tempDir}${LEDGER_MARK}${createHash('sha256').update(this.#ledger).digest('hex').slice(0, 16)}`;
  }

  /** The job's marks in .cronsafe-tmp but `ours`. */
  #otherMarks(ours: string): string[] {
    const prefix = `${path.basename(this.tempDir)}${LEDGER_MARK}`;
    return readdirSync(this.#root)
      .filter((e) => e.startsWith(prefix))
      .map((e) => path.join(this.#root, e))
      .filter((e) => e !== ours);
  }

  #readLedgerMark(): boolean {
    const ours = this.#ledgerMark();
    if (ours === undefined) return false;
    try {
      return this.#otherMarks(ours).length > 0;
    } catch {
      return false; // unreadable: the clean-up says why
    }
  }

  /** A failure only loses the hint. */
  #writeLedgerMark(): void {
    const ours = this.#ledgerMark();
    if (ours === undefined) return;
    try {
      if (lstatSync(ours, { throwIfNoEntry: false }) === undefined) mkdirSync(ours, DIR_MODE);
      for (const other of this.#otherMarks(ours)) if (lstatSync(other).isDirectory()) rmdirSync(other);
    } catch {
      /* refused, or changed meanwhile: nothing to tell next time */
    }
  }

  /**
   * Stop keeping the shared temp directory fresh, and let go of the job's (the run is over).
   * The attempt directories no attempt holds are removed when empty (one rmdir each, at most
   * one per attempt that ran at once); what a handler left in one waits for the next start.
   */
  close(): void {
    for (const slot of this.#freeSlots) {
      if (!this.#madeSlots.has(slot)) continue;
      try {
        rmdirSync(slot);
      } catch {
        /* not empty, or gone: the next start's */
      }
    }
    this.#freeSlots.length = 0;
    this.#madeSlots.clear();
    clearInterval(this.#keepFresh);
    this.#keepFresh = undefined;
    if (this.#jobLock !== undefined) closeSync(this.#jobLock);
    this.#jobLock = undefined;
  }

  /**
   * An exclusive run empties `.cronsafe-tmp/job-<name>` at its start, which only its run
   * lock makes safe, and that lock is its ledger's. Two configs of one name on two ledgers
   * (a copy with only state.sqlite changed) would each empty the other's live attempts'
   * files, and charge those attempts for it. So the run also holds a flock(2) on the
   * directory (the kernel drops it if the process dies): found held, another ledger's run
   * of this name is using it now (TempDirInUse), and the two configs must not share the name.
   * Where the file system has no flock (NFS refuses it on a directory), there is no guard.
   */
  #lockJobDir(): void {
    let fd: number;
    try {
      fd = openSync(this.tempDir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    } catch {
      return; // #own just made and checked it: what cannot be opened now is for the attempts to find
    }
    try {
      flockSync(fd, 'exnb');
    } catch (err) {
      closeSync(fd);
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'EWOULDBLOCK' && code !== 'EAGAIN') return;
      throw new TempDirInUse(this.tempDir);
    }
    this.#jobLock = fd;
  }

  #touch(): void {
    const now = new Date();
    utimesSync(this.tempDir, now, now);
    this.#lastTouch = now.getTime();
  }

  /**
   * A fresh temp path for one attempt, `<tempDir>/<slot>/<name>.tmp`: never made from the id,
   * so no id can steer it; a per-run random prefix and a counter keep concurrent and repeated
   * attempts (and runs sharing the directory) apart. The id and attempt are not needed for the
   * name. `<slot>` is the attempt's own directory while it runs (made by makeAttemptDir once
   * the handler is given the path, then reused by later attempts, one at a time): a handler
   * that broke the directory its {output} is in (`chmod 555 "$(dirname "$2")"`, a `tar -x`
   * there of a read-only top) broke the shared temp directory, so every attempt running beside
   * it failed too, and cronsafe could not tell which attempt did it: an innocent item that lost
   * the race to the chmod run after run was charged and dead-lettered. Now the damage is the
   * attempt's own; its rights are given back before the directory is reused (#releaseSlot).
   * Reused, not made and removed per attempt: a mkdir and an rmdir cost ~130 us of CPU on ext4.
   */
  tempPathFor(_id: string, _attempt: number): string {
    // Shared: keep our directory fresh (and recreate it, should another run have judged it
    // stale while we were idle), so that no live attempt's file is ever removed.
    if (this.shared && Date.now() - this.#lastTouch > this.shared.staleAfterMs / 4) {
      // Missing (a cleaner removed it since) and recreated here: an attempt whose path is of
      // the older generation failed for that, not for its item (lostWithTempDir), as when
      // checkTempDir recreates it. Asked before the mkdir: a new directory may get the old
      // one's inode number.
      const lost = this.#tempId !== undefined && !sameDir(this.tempDir, this.#tempId);
      this.#tempId = this.#recreateMidRun();
      if (lost) this.#newGeneration();
      this.#touch();
    }
    const slot = this.#freeSlots.pop() ?? `${this.tempDir}/${this.#prefix}.${++this.#slots}`;
    const tempPath = `${slot}/${this.#prefix}-${this.#gen}-${++this.#counter}.tmp`;
    this.#slotOf.set(tempPath, slot);
    return tempPath;
  }

  /** The temp directory was found gone and recreated: a new generation, whose attempt directories are made anew. */
  #newGeneration(): number {
    this.#madeSlots.clear();
    return ++this.#gen;
  }

  /**
   * The attempt is over: its directory goes back to the pool when it is still the one made and
   * ours to use (one lstat; its rights given back when its handler took them). Anything else is
   * never handed out again (the next start removes it). One the handler was never given is
   * reused as it is.
   */
  #releaseSlot(tempPath: string, given: boolean): OwnDirectoryGone | null {
    const slot = this.#slotOf.get(tempPath);
    if (slot === undefined) return null;
    this.#slotOf.delete(tempPath);
    if (!given) {
      this.#freeSlots.push(slot);
      return null;
    }
    const made = this.#madeSlots.get(slot);
    let st: Stats | undefined;
    try {
      st = made === undefined ? undefined : lstatSync(slot, { throwIfNoEntry: false });
      if (made !== undefined && st?.isDirectory() === true && st.dev === made.dev && st.ino === made.ino && ((st.mode & 0o700) === 0o700 || chmodSame(slot, st, (st.mode & 0o7777) | 0o700))) {
        this.#freeSlots.push(slot);
        return null;
      }
    } catch {
      /* cannot be looked at: not reused */
    }
    this.#madeSlots.delete(slot);
    if (made === undefined || st !== undefined) return null;
    // Removed under the attempt (an empty-directory cleaner, `rm -rf` of output.directory on its
    // way): its handler's write failed for that, not for its item, as when the temp directory
    // itself vanishes. Again and again (a cleaner every few seconds): the environment's to fix.
    if (++this.#slotLosses > MAX_TEMP_RECREATIONS) {
      throw new EnvironmentFault(`cronsafe's attempt directories in ${this.tempDir} were removed ${this.#slotLosses} times during this run (a cleaner?); stopping (nothing charged). Exclude it from the cleaner.`);
    }
    return new OwnDirectoryGone(`cronsafe's attempt directory ${slot} vanished under the attempt (an empty-directory cleaner?)`);
  }

  /**
   * Make the directory of an attempt's temp path (tempPathFor), when its handler is first given
   * the path and no earlier attempt made it: a mkdir per attempt running at once, not per
   * attempt (a module handler that never reads its outputPath pays nothing). A refusal is left to the handler's write to meet
   * (a temp directory gone or made unwritable meanwhile), judged as before. Made only while the
   * temp directory is still the one prepare() made (one lstat): output.directory swapped for a
   * link mid-run (to a directory laid out like it) made the handlers started then write their
   * temp files by path into the link's target, which cronsafe neither committed nor removed.
   * Now their {output} has no directory there (ENOENT): nothing is written outside
   * output.directory, and the attempt's failure finds the swap (the pass stops, nothing charged).
   */
  makeAttemptDir(tempPath: string): void {
    const slot = attemptDirOf(tempPath);
    try {
      // Made, and still there (one lstat: a cleaner may have removed it while it was free).
      if (this.#madeSlots.has(slot) && lstatSync(slot, { throwIfNoEntry: false }) !== undefined) return;
      this.#madeSlots.delete(slot);
      if (this.#tempId !== undefined && !sameDir(this.tempDir, this.#tempId)) return;
      mkdirSync(slot, DIR_MODE);
      const st = lstatSync(slot);
      this.#madeSlots.set(slot, { dev: st.dev, ino: st.ino });
    } catch {
      /* the handler's own write finds it: ENOENT, EACCES */
    }
  }

  /** `<outDir>/<outputName(id)>` (normally `<id>.out`); throws when the id is unsafe or the path would leave outDir. */
  finalPathFor(id: string): string {
    const reason = checkItemId(id);
    if (reason) throw new Error(`unsafe item id ${JSON.stringify(id)}: ${reason}`);
    const name = outputName(id, this.#source);
    // A checked id maps to a relative name with no empty, "." or ".." segment, so joining is
    // what resolve would give; resolve (a dozen strings per call, per item) stays for a root
    // output directory. The check below holds either way.
    const final = this.dir === '/' ? path.resolve(this.dir, name) : `${this.dir}/${name}`;
    if (!final.startsWith(this.dir + path.sep)) {
      throw new Error(`item id ${JSON.stringify(id)} resolves outside the output directory ${this.dir}`);
    }
    return final;
  }

  /**
   * Whether the item's output was committed (renamed into place, see commit) by an attempt
   * claimed at `claimedAt`: then that attempt got that far before its run died. The proof is
   * the file's birth time: commit renames the attempt's own temp file, created after the
   * claim; what may happen to an older output later (chmod, chown, a hard link, touch, a
   * rewrite in place: each moves its ctime and mtime) leaves its birth time. The kernel stamps
   * it with its coarse clock, up to a tick behind the one that stamped the claim: a temp file
   * made 1 ms after the claim can be born a few ms "before" it, so BIRTH_CLOCK_SLACK_MS is
   * allowed (no other file of the id is made that close to a claim of it). A doubt (no birth
   * time, as on NFS or where statx is refused: realBirthTimes; a link; no file; an unsafe id)
   * is a no: the item is simply done again.
   */
  committedSince(id: string, claimedAt: number): boolean {
    // Another job's commit of the same id would pass for ours: run the item again instead.
    if (this.sharedWith().length > 0) return false;
    // So would one of a config of this name on another ledger (a copy that kept the name): its
    // run since the crash left its ledger mark here, and wrote the same ids' outputs. Asked
    // before prepare() reads the mark (and makes ours), as recovery comes first.
    this.#otherLedgerBefore ??= this.#job !== undefined && !this.shared && this.#readLedgerMark();
    if (this.#otherLedgerBefore) return false;
    try {
      // A link on the way would make lstat look at somebody else's file.
      if (this.outputProblem(id) !== null) return false;
      const final = this.finalPathFor(id);
      if (this.#nestedOutputDir(final)) return false;
      const stat = lstatSync(final, { throwIfNoEntry: false });
      this.#realBirthTimes ??= realBirthTimes([this.dir, path.dirname(this.dir), process.execPath]);
      // No birth time reads as 0 (NFS). Another user's file is not the one commit renamed (the
      // handler's, made as cronsafe's user): in a shared, sticky output.directory, one planted
      // at `<id>.out` while the item was claimed passed for its committed output after a crash,
      // and the item was done without its handler ever finishing.
      return this.#realBirthTimes && stat !== undefined && stat.isFile() && this.#trustedOwner(stat.uid) && stat.birthtimeMs > 0 && stat.birthtimeMs >= claimedAt - BIRTH_CLOCK_SLACK_MS;
    } catch {
      return false;
    }
  }

  /** cronsafe's user, root, or output.directory's owner (as for the directories on an output's way). */
  #trustedOwner(uid: number): boolean {
    const me = process.getuid?.();
    return me === undefined || uid === me || uid === 0 || uid === this.#outOwner();
  }

  /** output.directory's owner: as prepare() found it, or now (crash recovery asks before prepare). */
  #outOwner(): number | undefined {
    try {
      return this.#dirUid ?? statSync(this.dir, { throwIfNoEntry: false })?.uid;
    } catch {
      return undefined;
    }
  }

  /**
   * What would stop the item's output from being committed (a link or a file where a
   * directory must be, a directory where the output goes), or null. Reads only; the pass
   * may ask before it runs the handler, and commit refuses the same (OutputPathError).
   */
  outputProblem(id: string): string | null {
    return outputPathProblem(this.dir, this.finalPathFor(id), this.#outOwner());
  }

  /**
   * Move the attempt's temp file to the item's final path. Returns false when the
   * handler wrote nothing. The file and the directory entry are fsynced before and
   * after the rename, so once the ledger says done the output survives a power cut.
   * `beforeRename` may throw to refuse the rename once the file is synced (the lease guard).
   * `fullSeen`: whether an attempt of the pass found the output file system full.
   * OutputMaybeCut when it is full: the output is not committed (nor is a missing one
   * taken for a handler that wrote nothing).
   */
  async commit(tempPath: string, id: string, beforeRename?: () => void, fullSeen?: () => boolean, given = true): Promise<boolean> {
    this.assertTemp(tempPath);
    const final = this.finalPathFor(id);
    // Sync and non-throwing: most handlers that write nothing make this the hot path, and
    // a thrown ENOENT through fs.promises cost a third of a no-op run's CPU. A handler never
    // given the path (`given`: its directory was never made) wrote nothing there.
    const stat = given ? this.#lstatTemp(tempPath) : undefined;
    if (stat === undefined) {
      // No file: the handler wrote nothing, unless our directory went away with it (and
      // perhaps came back already, recreated for another attempt).
      const gone = this.lostWithTempDir(tempPath);
      if (gone) throw gone;
      // Nor could it create its output on a full file system (no inode left: ENOSPC on the
      // open) and exit 0 anyway (`cat "$1" > "$2"; echo converted`): recorded done with no
      // output, never redone. One statfs(2), synchronous (~1 us) on this hot path.
      if (fullSeen?.() || this.#fullNow()) throw new OutputMaybeCut(true);
      const slotGone = this.#releaseSlot(tempPath, given);
      if (slotGone) throw slotGone;
      return false;
    }
    // Our directory swapped for a link meanwhile (a handler's `mv "$(dirname "$2")" ...; ln -s
    // /elsewhere "$(dirname "$2")"`): the path reached a file outside output.directory, which
    // the rename moved in as the item's output (deleting it there). Refused as at start-up:
    // the pass stops, nothing charged. One lstat, on the path that writes an output only.
    const swapped = this.checkTempDir();
    if (swapped) throw swapped;
    const replaced = this.#attemptDirReplaced(tempPath);
    if (replaced) throw replaced;
    if (!stat.isFile()) throw new Error(`handler output for ${JSON.stringify(id)} is not a regular file: ${tempPath}`);
    await fsyncPath(tempPath, true, this.detachedWriters);
    // A handler that does not check its writes (a shell script whose last command is not
    // the one that wrote, `cat "$1" > "$2"; echo converted`) exits 0 with an output a full
    // file system cut short: committed, a half-written file would be the item's "done"
    // output for good. A full file system now (or one an attempt of the pass found full,
    // whose clean-up may have freed a little space since) is the same fault as when an
    // attempt fails.
    if (fullSeen?.() || (await this.full())) throw new OutputMaybeCut();
    beforeRename?.();
    try {
      try {
        await this.#renameIntoPlace(tempPath, final);
      } catch (err) {
        // The handler took the rights of its own directory (`chmod 555 "$(dirname "$2")"`) and
        // exited 0, its output whole: ours, given back; the output is committed.
        if (errorCode(err) !== 'EACCES' || !ownerRightsBack(attemptDirOf(tempPath))) throw err;
        await this.#renameIntoPlace(tempPath, final);
      }
    } catch (err) {
      // Our temp directory made unwritable for this user during the attempt (a handler's
      // `chmod 555 "$(dirname "$2")"`, or an operator's chmod): judged as an attempt that failed
      // there (runItem asks unwritable()), which stops the pass uncharged, or charges an item
      // that did it retry.maxAttempts times. As an environment fault here, a handler that did it
      // and exited 0 stopped every run at its item, never charged.
      if ((await this.unwritable()) !== null) throw err;
      // Our own write refused, or a file system mounted inside output.directory (or over
      // our temp directory) that a rename cannot cross: the environment's fault (the pass
      // stops), not the item's, which would otherwise be run and charged until dead.
      const what = `move the output of ${JSON.stringify(id)} into ${path.dirname(final)}`;
      const refused = targetRefused(err, what, final) ?? writeRefused(err, what) ?? crossDevice(err, what, this.tempDir);
      throw refused === null ? err : new EnvironmentFault(`${refused}; stopping, nothing charged`);
    }
    try {
      await fsyncPath(path.dirname(final));
    } catch (err) {
      // Made unreadable since prepare (or a directory in it that is not ours): the output is
      // in place, the sync is cronsafe's own, not the item's; a redo overwrites the output.
      const refused = syncRefused(err, path.dirname(final));
      throw refused === null ? err : new EnvironmentFault(`${refused}; stopping, nothing charged`);
    }
    this.#committed++;
    this.#releaseSlot(tempPath, given);
    return true;
  }

  /**
   * lstat of an attempt's temp path; when its handler took the search right from its own
   * directory (`chmod 000 "$(dirname "$2")"`), given back first (its directory is ours).
   */
  #lstatTemp(tempPath: string): Stats | undefined {
    try {
      return lstatSync(tempPath, { throwIfNoEntry: false });
    } catch (err) {
      if (errorCode(err) !== 'EACCES' || !ownerRightsBack(attemptDirOf(tempPath))) throw err;
      return lstatSync(tempPath, { throwIfNoEntry: false });
    }
  }

  /**
   * The attempt's own directory swapped for a link (or another user's directory) during the
   * attempt (a handler's `mv "$(dirname "$2")" ...; ln -s /elsewhere "$(dirname "$2")"`): a
   * path through it reaches a file outside output.directory, which a commit would move in (and
   * delete there). Refused as the temp directory's own swap is: the pass stops, nothing charged.
   */
  #attemptDirReplaced(tempPath: string): EnvironmentFault | null {
    const dir = attemptDirOf(tempPath);
    const problem = ownDirProblem(dir, this.#dirUid);
    return problem === null ? null : new EnvironmentFault(`${new UnsafeOwnDirectory(dir, problem).message.replace(/\.$/, '')}; it was replaced during the run: stopping (nothing charged)`);
  }

  /**
   * Rename a finished temp file to `final`, making its parent directories first. An
   * empty-directory cleaner on output.directory can remove a parent just made before the
   * rename (ENOENT while the temp file is still there): then again, a few times, so that
   * the item is not charged for that race.
   */
  async #renameIntoPlace(tempPath: string, final: string): Promise<void> {
    for (let tries = 1; ; tries++) {
      let place: ReturnType<typeof pinOutputPlace> = null;
      try {
        // Parents made and the rename made through the parent held open, level by level: a
        // link below the output directory stops us, never followed, also one swapped in
        // between. Inside the try: a parent removed since it was made (an empty-directory
        // cleaner) fails an open with ENOENT, which is made again below, as for the rename.
        place = pinOutputPlace(this.dir, final, this.#dirUid);
        await rename(tempPath, place?.path ?? final);
        return;
      } catch (err) {
        if (place) namedAsPath(err, place.path, final);
        const parentGone = (err as NodeJS.ErrnoException).code === 'ENOENT' && lstatSync(tempPath, { throwIfNoEntry: false }) !== undefined;
        if (!parentGone || tries >= 5) throw err;
      } finally {
        place?.close();
      }
    }
  }

  /**
   * Remove an attempt's temp file, if any (failed or interrupted attempt). Returns
   * OwnDirectoryGone when the temp directory itself had vanished (recreated now): then
   * the attempt most likely failed for that, and the pass hands it back uncharged.
   */
  async discard(tempPath: string, given = true): Promise<OwnDirectoryGone | null> {
    this.assertTemp(tempPath);
    // Asked first: through our directory swapped for a link (the handler's doing, see
    // commit), the removal deleted the target's file of that name, outside output.directory.
    // Such a swap is refused here (EnvironmentFault); one that vanished is recreated, empty.
    const lost = this.lostWithTempDir(tempPath);
    if (given) {
      // The attempt's own directory swapped too: refused as in commit, nothing removed through it.
      const replaced = this.#attemptDirReplaced(tempPath);
      if (replaced) {
        this.#slotOf.delete(tempPath);
        throw replaced;
      }
      // Made read-only by its handler: its file could not be removed.
      ownerRightsBack(attemptDirOf(tempPath));
      await removeTree(tempPath);
    }
    const slotGone = this.#releaseSlot(tempPath, given);
    return lost ?? slotGone;
  }

  /**
   * OwnDirectoryGone when the temp directory the attempt's `tempPath` was in is gone: it
   * vanished (recreated now, checkTempDir), or it was replaced and recreated while the
   * attempt ran (another attempt noticed first: the path's generation is older). Else null.
   */
  private lostWithTempDir(tempPath: string): OwnDirectoryGone | null {
    const now = this.checkTempDir();
    if (now) return now;
    const gen = /-(\d+)-\d+\.tmp$/.exec(tempPath)?.[1];
    if (gen !== undefined && Number(gen) < this.#gen) {
      return new OwnDirectoryGone(`cronsafe's temp directory ${this.tempDir} vanished under the attempt (an empty-directory cleaner?); it was recreated`);
    }
    return null;
  }

  /**
   * Whether the temp directory is still the one prepare() made. When it vanished (an
   * empty-directory cleaner) or was replaced, it is recreated, still refusing links and
   * foreign directories (UnsafeOwnDirectory), and the returned OwnDirectoryGone says so:
   * the attempt that used it is not the item's fault. Null when all is well. One lstat;
   * callers ask only after an attempt failed or wrote nothing.
   */
  checkTempDir(): OwnDirectoryGone | null {
    if (this.#tempId !== undefined && sameDir(this.tempDir, this.#tempId)) return null;
    // Not ours to recreate: the user's output directory itself is gone or was replaced.
    if (this.#outId !== undefined) {
      const out = statIfDir(this.dir);
      if (out === undefined || !out.isDirectory() || out.dev !== this.#outId.dev || out.ino !== this.#outId.ino) {
        throw new EnvironmentFault(`output.directory ${this.dir} vanished or was replaced during the run; stopping (nothing charged)`);
      }
    }
    const was = this.#tempId;
    this.#tempId = this.#recreateMidRun();
    if (was === undefined) return null; // never prepared: nothing to compare with
    // Something removes it over and over (a cleaner every few seconds): handing attempts
    // back for ever would never finish. That is the environment's fault to fix: stop.
    if (this.#newGeneration() > MAX_TEMP_RECREATIONS) {
      throw new EnvironmentFault(
        `cronsafe's temp directory ${this.tempDir} was removed ${this.#gen} times during this run (a cleaner?); stopping (nothing charged). Exclude it from the cleaner.`,
      );
    }
    return new OwnDirectoryGone(`cronsafe's temp directory ${this.tempDir} vanished under the attempt (an empty-directory cleaner?); recreated it`);
  }

  /**
   * Our directories as they are now, made again where missing. A cleaner that is removing
   * the tree may take the parent away between our two mkdirs (ENOENT): then again, a few
   * times, so that an attempt that lost its directory is never judged by that race.
   */
  #recreate(): DirId {
    for (let tries = 1; ; tries++) {
      try {
        const root = this.#own(this.#root);
        return this.tempDir === this.#root ? root : this.#own(this.tempDir);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || tries >= 5) throw err;
      }
    }
  }

  /**
   * #recreate while attempts run: a link or someone else's directory where ours was is
   * refused as at start-up, and it is the environment's fault (the pass stops, nothing
   * charged), not the fault of the items whose attempts ran beside it.
   */
  #recreateMidRun(): DirId {
    let id: DirId;
    try {
      id = this.#recreate();
    } catch (err) {
      if (err instanceof UnsafeOwnDirectory) throw new EnvironmentFault(`${err.message.replace(/\.$/, '')}; it was replaced during the run: stopping (nothing charged)`);
      throw err;
    }
    // The flock stayed with the directory that vanished: taken on the new one, or a run of a
    // config of the same name (another ledger) could start now and empty our attempts' files.
    if (this.#jobLock !== undefined) {
      closeSync(this.#jobLock);
      this.#jobLock = undefined;
      try {
        this.#lockJobDir();
      } catch (err) {
        if (!(err instanceof TempDirInUse)) throw err;
        throw new EnvironmentFault(`cronsafe's temp directory ${this.tempDir} was made again during the run and another run of a job named ${JSON.stringify(this.#job)} (another ledger) took it meanwhile; stopping (nothing charged). Give each config its own name`);
      }
    }
    return id;
  }

  #own(dir: string): DirId {
    return ensureOwnDir(dir, this.#dirUid);
  }

  /**
   * True when the output file system is (nearly) full: less than 1% of it, or 16 MiB,
   * whichever is less, is free; or less than 1% of its inodes, or 1,024, are (ENOSPC while
   * blocks are free: many small files on ext4, a tmpfs's nr_inodes). An attempt that failed
   * then most likely failed for that (ENOSPC in the handler), which is the environment's
   * fault, not the item's; and a handler that succeeded then may have lost a write it did
   * not check. Free for root (cronsafe's user, and its command handlers') counts the blocks
   * ext4 reserves for root (5% by default), which it may write and bavail leaves out; not
   * for root of a user namespace (reservedForUs), nor on another file system (btrfs's bfree
   * counts space no file can use: bavail is 0 once its metadata is exhausted).
   */
  async full(): Promise<boolean> {
    let s: StatsFs;
    try {
      s = await statfs(this.dir);
    } catch {
      return false;
    }
    return isFull(s) || (probeRoom(s) && this.#quotaUsedUp());
  }

  /**
   * Whether this user's disk quota (or the directory's project quota: XFS, ext4 prjquota) on
   * the output file system is used up, which statfs(2) does not show: the file system has
   * room, but a write of ours there is refused (EDQUOT, or ENOSPC). Each attempt that failed
   * on it was charged until dead-lettered, and a handler that ignored its refused write had
   * its cut output committed. A block written to a new file in our temp directory, removed
   * at once; asked only when an attempt failed, or committed (beside two fsyncs).
   */
  async #quotaUsedUp(): Promise<boolean> {
    const probe = `${this.tempDir}/${this.#prefix}-${this.#gen}-${++this.#counter}.probe`;
    let file: FileHandle | undefined;
    try {
      file = await open(probe, 'wx', 0o600);
      // A short write (the quota's limit within the block) is followed by the refusal that
      // tells why: EDQUOT, or EFBIG (a file size limit, not a full file system).
      for (let off = 0, n = 1; off < PROBE_BLOCK.length && n > 0; off += n) n = (await file.write(PROBE_BLOCK, off, PROBE_BLOCK.length - off, off)).bytesWritten;
      await file.close();
      file = undefined;
      return false;
    } catch (err) {
      return noRoom(errorCode(err));
    } finally {
      await file?.close().catch(() => undefined);
      await unlink(probe).catch(() => undefined);
    }
  }

  /** #quotaUsedUp, synchronous. */
  #quotaUsedUpNow(): boolean {
    return noRoom(blockRefused(`${this.tempDir}/${this.#prefix}-${this.#gen}-${++this.#counter}.probe`));
  }

  /**
   * The bytes an attempt's temp file takes on the file system (its allocated blocks), for
   * filledBy; 0 when it is missing or not a plain file.
   */
  bytesOf(tempPath: string): number {
    try {
      const st = lstatSync(tempPath, { throwIfNoEntry: false });
      return st?.isFile() ? st.blocks * 512 : 0;
    } catch {
      return 0;
    }
  }

  /**
   * What was free on the output file system when an attempt starts (for filledBy): a statfs
   * at most every FREE_SAMPLE_MS (~9 us each; a module no-op item takes ~30 us); undefined when
   * it cannot be read.
   */
  freeAtStart(): number | undefined {
    const now = performance.now();
    if (this.#freeSample === undefined || now - this.#freeSample.at >= FREE_SAMPLE_MS) {
      try {
        this.#freeSample = { at: now, bytes: freeBytes(statfsSync(this.dir)) };
      } catch {
        return undefined;
      }
    }
    return this.#freeSample.bytes;
  }

  /**
   * Whether an attempt that failed on a full output file system filled it itself: after its
   * clean-up the file system is no longer full, what its temp file took (`ownBytes`, bytesOf
   * before the clean-up) is at least half of what is free now, at least three quarters of
   * what was free when the attempt started (`freeAtStart`), and no less than what the run's
   * other temp files take now. An item whose output is larger than the free space (a
   * decompression bomb, a big file on a small volume) would otherwise stop every run at it,
   * uncharged for ever; a file system that stays full after the clean-up (filled by others'
   * files) says nothing against the item. Nor does one filled beside it: by another process
   * while it wrote (the space was free when it started), or by a sibling attempt writing more
   * (a bomb the item started beside, cleaned up after it): such good items were charged and
   * dead-lettered as "its output alone filled the file system".
   */
  async filledBy(ownBytes: number, tempPath: string, freeAtStart: number | undefined): Promise<boolean> {
    if (ownBytes <= 0 || freeAtStart === undefined || ownBytes * 4 < freeAtStart * 3) return false;
    try {
      const s = await statfs(this.dir);
      return !isFull(s) && ownBytes * 2 >= freeBytes(s) && ownBytes >= this.#othersBytes(tempPath);
    } catch {
      return false;
    }
  }

  /** The bytes the files in the run's temp directory but `tempPath`'s attempt's take (a failed attempt's siblings, each in its own directory). */
  #othersBytes(tempPath: string): number {
    let sum = 0;
    const own = attemptDirOf(tempPath);
    try {
      for (const e of readdirSync(this.tempDir, { withFileTypes: true })) {
        const p = path.join(this.tempDir, e.name);
        if (p === own) continue;
        if (!e.isDirectory()) sum += this.bytesOf(p);
        else for (const f of readdirSync(p)) sum += this.bytesOf(path.join(p, f));
      }
    } catch {
      return Infinity; // cannot tell: not the item's to answer for
    }
    return sum;
  }

  /**
   * full(), synchronous. The quota's probe only once an output of this run was committed (a
   * handler that writes outputs): the check runs for every item that wrote none, the hot path
   * of handlers that never write one.
   */
  #fullNow(): boolean {
    let s: StatsFs;
    try {
      s = statfsSync(this.dir);
    } catch {
      return false;
    }
    return isFull(s) || (this.#committed > 0 && probeRoom(s) && this.#quotaUsedUpNow());
  }

  /**
   * True when the output file system is mounted read-only (ext4's errors=remount-ro after
   * an I/O error, a volume detached read-only): no attempt can write an output, through
   * no fault of its item. access(2) answers EROFS for a write check there, even for root.
   * Not after ext4's errors=remount-ro on recent kernels (6.x: the mount shows
   * `emergency_ro`): writes fail EROFS while access(2), statfs and the mount flags still say
   * read-write, and every attempt that failed then was charged (exit 0). So a directory is
   * made in our temp directory too (asked only when an attempt failed, or wrote nothing).
   */
  async readOnly(): Promise<boolean> {
    const refused = (err: unknown): boolean => (err as NodeJS.ErrnoException).code === 'EROFS';
    if (await access(this.dir, constants.W_OK).then(() => false, refused)) return true;
    const s = await statfs(this.dir).catch(() => undefined);
    if (s !== undefined && !probeRoom(s)) return false;
    const probe = `${this.tempDir}/${this.#prefix}-${this.#gen}-${++this.#counter}.probe`;
    return mkdir(probe).then(
      () => rmdir(probe).then(() => false, () => false),
      refused,
    );
  }

  /**
   * Why this run's user cannot create a file in its temp directory now, or null: output.directory
   * or the temp directory made unsearchable or unwritable for it since prepare (an operator's
   * `chmod 000` or `chmod -R go-rwx` on the volume, a restore that changed their owner). An
   * attempt that failed then failed for that (its handler could not create {output}, or
   * cronsafe could not look at it), not for its item. access(2): root passes; a directory gone
   * is checkTempDir's to tell.
   */
  async unwritable(): Promise<string | null> {
    return access(this.tempDir, constants.W_OK | constants.X_OK).then(
      () => null,
      (err: unknown) => {
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'EACCES' && code !== 'EPERM') return null;
        return `cannot be written by this user (uid ${process.getuid?.() ?? '?'}) now: ${code} on cronsafe's temp directory ${this.tempDir} (a mode or owner on its way changed during the run?)`;
      },
    );
  }

  // A wrong path here would rename or delete something that is not ours.
  private assertTemp(tempPath: string): void {
    // The paths tempPathFor gives (`<tempDir>/<slot>/<name>`, two plain segments) pass without resolve.
    const parts = tempPath.startsWith(this.tempDir) && tempPath[this.tempDir.length] === '/' ? tempPath.slice(this.tempDir.length + 1).split('/') : [];
    if (parts.length === 2 && parts.every((n) => n !== '' && n !== '.' && n !== '..')) return;
    throw new Error(`not a cronsafe temp path: ${tempPath} (expected <slot>/<name> inside ${this.tempDir})`);
  }
}

/**
 * Crash recovery's `committed` test (ReclaimOptions) over `outputs`, and how many distinct
 * ids it accepted (a set: PostgreSQL retries a whole reclaim transaction on a transient
 * error, asking again). Without an output directory there is nothing to prove.
 */
export function committedOutputs(outputs: OutputStore | undefined): { committed?: (id: string, claimedAt: number) => boolean; count: () => number } {
  const accepted = new Set<string>();
  if (!outputs) return { count: () => 0 };
  return {
    committed: (id, claimedAt) => outputs.committedSince(id, claimedAt) && accepted.add(id).size > 0,
    count: () => accepted.size,
  };
}

/** A write refused (its errorCode) for lack of room: the file system full (ENOSPC) or the quota used up (EDQUOT). */
function noRoom(code: string | undefined): boolean {
  return code === 'ENOSPC' || code === 'EDQUOT';
}

/** OutputStore.full's answer from the output file system's statfs(2). */
function isFull(s: StatsFs): boolean {
  const free = freeBytes(s);
  // No inode count (files 0: btrfs, some FUSE and network file systems) cannot run out.
  const noInodes = s.files > 0 && s.ffree < Math.min(1024, s.files / 100);
  return noInodes || free < Math.min(16 * 1024 * 1024, (s.blocks * s.bsize) / 100);
}

/**
 * Whether our own probes (the quota's 4 KiB file, the read-only check's directory) may be made
 * on the file system of `s`: not where one could take the last inodes or blocks that an
 * attempt running beside it needs. On a tmpfs with a few inodes left, a probe took the last
 * one as a handler's `cp` created its output: the `cp` failed (ENOSPC), and its failure,
 * judged once the probe was gone, was charged to its item. Near its end a file system is
 * judged by statfs alone (isFull).
 */
function probeRoom(s: StatsFs): boolean {
  return (s.files === 0 || s.ffree >= PROBE_MIN_INODES) && freeBytes(s) >= PROBE_MIN_BYTES;
}
const PROBE_MIN_INODES = 64;
const PROBE_MIN_BYTES = 1024 * 1024;

/** The bytes this process may still write on the file system of `s` (see OutputStore.full). */
function freeBytes(s: StatsFs): number {
  return (s.type === EXT_MAGIC && reservedForUs() ? s.bfree : s.bavail) * s.bsize;
}

/** ext2, ext3 and ext4's statfs f_type. */
const EXT_MAGIC = 0xef53;

let reserved: boolean | undefined;

/**
 * Whether this process may write the blocks ext4 reserves for root (its default resuid 0):
 * root of the machine's own user namespace. Root of another (a rootless container, a pod
 * with hostUsers: false) is another user to ext4, refused those blocks (ENOSPC): counted
 * free, a full volume was not, so failed attempts were charged and cut outputs committed.
 * Its /proc/self/uid_map is the identity over every uid; unreadable, taken as not.
 */
function reservedForUs(): boolean {
  if (reserved === undefined) {
    let map = '';
    try {
      map = readFileSync('/proc/self/uid_map', 'utf8');
    } catch {
      /* no /proc: the reserve is not counted */
    }
    reserved = process.geteuid?.() === 0 && /^\s*0\s+0\s+4294967295\s*$/m.test(map);
  }
  return reserved;
}

/**
 * `dir`'s stat (following a link, as output.directory may be one), or undefined when there
 * is no directory to stat: missing, or a path through a file or a link to itself (ENOTDIR,
 * ELOOP: thrown, the attempt's clean-up took it for no finding, and its item was charged).
 */
function statIfDir(dir: string): Stats | undefined {
  try {
    return statSync(dir, { throwIfNoEntry: false });
  } catch (err) {
    const code = errorCode(err);
    if (code === 'ENOTDIR' || code === 'ELOOP') return undefined;
    throw err;
  }
}
