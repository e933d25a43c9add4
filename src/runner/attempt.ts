import { statSync, type Stats } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Claim } from '../ledger/types.js';
import { AttemptSignal } from './attempt-signal.js';
import { handBackLine, judgeFailure, sourceGone, whereItWent, type FailureVerdict } from './failure.js';
import { coerceError } from '../errors.js';
import { EnvironmentFault, OutputMaybeCut } from './faults.js';
import { ProcessBroken } from './handlers/exit-guard.js';
import { isPlainId, itemPathProblem, itemPaths } from './item-id.js';
import { checkItemId } from './output-name.js';
import { itemBehindLink } from './scan.js';
import type { OutputStore } from './output.js';
import type { PassState } from './pass-state.js';
import { HandlerFailure, type HandlerContext, type WorkItem } from './types.js';

/**
 * One attempt of a claimed item: the checks before its handler runs, the handler, its
 * output, and its result queued for the ledger (complete, or the verdict on a failure).
 * Never throws: every ending is a result.
 */
export async function runItem(p: PassState, claim: Claim, rootReplaced: boolean): Promise<void> {
  const { drain, inflight, outputs, results, config, scene } = p;
  const abort = new AttemptSignal();
  const ctx = new AttemptContext(abort, p.log, claim);
  inflight.set(claim.id, abort);
  if (drain.aborting.aborted) abort.abort(drain.aborting.reason);
  // Problems known before the handler runs cannot be fixed by running it again: an id
  // that would escape output.directory, something foreign where its output goes, or a path
  // too long to open.
  const unsafeId = checkItemId(claim.id);
  let unsafe: string | null;
  try {
    unsafe = unsafeId ? `unsafe item id: ${unsafeId}` : (outputs?.outputProblem(claim.id) ?? itemPathProblem(config.source.directory, claim.id));
  } catch (err) {
    // A directory on the output's way that this user cannot search (EACCES: another user's,
    // mode 0700): the lstat threw here, outside any attempt, and ended the process with a
    // stack trace, every claim of the run left to crash recovery (charged). Not the item's.
    inflight.delete(claim.id);
    const fault = new EnvironmentFault(`cannot look at where the output of ${JSON.stringify(claim.id)} goes: ${coerceError(err).message}; stopping, nothing charged`);
    settle(p, claim, { kind: 'stop', reason: `not charged: ${fault.message}`, fault, unstarted: true }, ctx);
    return;
  }
  if (unsafe) {
    inflight.delete(claim.id);
    results.fail(claim, `${unsafe} (the handler was not run)`, p.deadAtOnce);
    return;
  }
  const item = workItem(config.source.directory, claim);
  // Deleted between the scan and now, or replaced by what the scan never takes as an item
  // (a FIFO, a directory, a device): forgotten before its handler runs (a handler that
  // shrugs at a missing input would otherwise turn it into an empty "done" output, and a
  // module handler's readFile of a FIFO blocks in open(2) on a libuv thread that nothing
  // cancels, so the process could not exit). One stat(2), no exception on a miss;
  // whereItWent tells the misses apart: a source that vanished as a whole, or a directory
  // made unreadable since the scan, stops the pass. None of them, the item is there and runs.
  // A nested item whose directory was replaced by a link since the scan is asked too (one
  // stat(2), itemBehindLink): its path now leads out of the source.
  // One swapped since the scan for a link to one of cronsafe's own files (the ledger, the
  // lock, the config and its secrets), which the scan never takes as an item, reached the
  // handler (a copying handler put the live ledger or the config into output.directory): it
  // is forgotten as gone too, its handler not run.
  const { source } = scene;
  const file = fsPath(item);
  const moved = source?.realDirectory !== undefined && claim.id.includes('/') && itemBehindLink(source.directory, source.realDirectory, file);
  const there = source === undefined || moved ? undefined : fileThere(file);
  // The root itself replaced (a link repointed, or the directory renamed away and another
  // made at its path) since the pass began: its files of the same names are not the items
  // this scan found (whereItWent stops the pass). A real path is asked too: it cannot be
  // repointed, but it can be renamed and replaced, and a handler that exits 0 anyway ran on
  // the other directory's file. Asked once for the claims started together (dispatch.ts).
  const went = source !== undefined && (rootReplaced || moved || there === undefined || !there.isFile()) ? await whereItWent(file, scene) : null;
  if (went === null && there !== undefined && source?.own !== undefined && isOwnFile(source.own, there)) {
    inflight.delete(claim.id);
    settle(p, claim, { kind: 'gone' }, ctx);
    return;
  }
  if (went) {
    inflight.delete(claim.id);
    // Found before its handler started: a stop undoes the claim (attempts count starts).
    settle(p, claim, went.kind === 'stop' ? { ...went, unstarted: true } : went, ctx);
    return;
  }
  let tempPath: string | undefined;
  /** What was free on the output file system as the attempt started (OutputStore.filledBy). */
  let freeAtStart: number | undefined;
  // The handler's time, for the histogram and the log, on the monotonic clock: a step of the
  // wall clock during the attempt (NTP, a VM resumed) would make it negative, and a negative
  // observation takes cronsafe_item_duration_seconds_sum down (a counter reset to rate()).
  const started = performance.now();
  try {
    // Inside: a temp directory found replaced here is judged like any other attempt's fault.
    tempPath = outputs?.tempPathFor(claim.id, claim.attempt);
    freeAtStart = outputs?.freeAtStart();
    if (tempPath !== undefined && outputs !== undefined) ctx.setOutput(outputs, tempPath);
    await p.handler.run(item, ctx);
    // Replaced during the attempt: the handler may have read the other directory's file of
    // this name. Its output is not committed; the pass stops, nothing charged. Asked here only
    // when there may be an output to commit: an attempt's result alone is covered by the check
    // made before its batch of results is written (PassState.rootCheckedBeforeWrite).
    if (ctx.outputGiven && source !== undefined && p.rootReplaced()) throw sourceGone(source.directory);
    // Asked again by commit just before its rename: the pod may have been paused (a long
    // GC, a frozen container) while the output was synced, and a sibling taken it over.
    const guard = p.leaseGuard && tempPath ? () => leaseGuard(p, claim) : undefined;
    guard?.();
    // Output first, ledger second: a crash in between means a redo that overwrites.
    if (tempPath && outputs && !(await outputs.commit(tempPath, claim.id, guard, () => scene.outputFullSeen, ctx.outputGiven))) {
      p.noOutput++;
      if (config.handler.expectOutput) {
        throw new HandlerFailure('the handler succeeded but wrote nothing to its output path ({output}), and handler.expectOutput is true');
      }
      // A handler that writes outputs (one was committed in this pass) and exits 0 without
      // checking that it could (`cat "$1" > "$2"; echo converted`) left none on a file system
      // that went read-only mid-run: its item was recorded done with no output, for good.
      // Asked only then, so a handler that never writes one pays nothing; the catch below
      // finds the file system read-only and stops the pass, nothing charged. (A full one,
      // commit has refused already: OutputMaybeCut.)
      if (p.committed > 0 && (await outputs.readOnly())) {
        throw new HandlerFailure('the handler succeeded but wrote nothing to its output path ({output}) while the output file system is read-only: its output could not be created; not recorded done');
      }
      // Nor where this user cannot create it (an operator's `chmod -R a-w` of output.directory
      // mid-run, a sibling's handler that made the directory of its {output} read-only): the
      // catch finds it unwritable, stops the pass and hands the item back uncharged.
      const unwritable = p.committed > 0 ? await outputs.unwritable() : null;
      if (unwritable !== null) {
        throw new HandlerFailure(`the handler succeeded but wrote nothing to its output path ({output}) while output.directory ${unwritable}: its output could not be created; not recorded done`);
      }
    } else if (tempPath && outputs) {
      p.committed++;
    }
    const ms = performance.now() - started;
    p.durations.set(claim, ms);
    if (p.debug) ctx.log.debug({ ms: Math.round(ms) }, 'item done');
    scene.succeeded = true;
    results.complete(claim);
  } catch (err) {
    p.durations.set(claim, performance.now() - started);
    // Asked before the clean-up, which frees what the failed attempt wrote; so is the pass
    // told, so that a sibling's commit asked after that clean-up still counts it full.
    const full = outputs !== undefined && (err instanceof OutputMaybeCut || (await outputs.full()));
    if (full) scene.outputFullSeen = true;
    const readOnly = outputs !== undefined && (await outputs.readOnly());
    const unwritable = outputs !== undefined && !full && !readOnly ? await outputs.unwritable() : null;
    // What its own output took, asked before the clean-up frees it (filledBy, below).
    const ownBytes = full && tempPath && outputs ? outputs.bytesOf(tempPath) : 0;
    // The environment's fault found by the clean-up (output.directory gone) stops the pass.
    const tempGone = tempPath && outputs ? await outputs.discard(tempPath, ctx.outputGiven).catch((e: unknown) => (e instanceof EnvironmentFault ? e : null)) : null;
    const filledOutput = full && outputs !== undefined && tempPath !== undefined && (await outputs.filledBy(ownBytes, tempPath, freeAtStart));
    const message = err instanceof Error ? err.message : String(err);
    // The path taken before the attempt (`file`), not read again from `item`: a module handler
    // may have changed it (`item.path = item.path.replace('.txt', '.json')`), and its failure
    // was judged by that file, missing: forgotten as "item gone", never charged, every run.
    const attempt = { err, message, aborted: abort.aborted, tempGone: tempGone ?? undefined, outputFull: full, filledOutput, outputReadOnly: readOnly, outputUnwritable: unwritable ?? undefined, itemPath: file, stopping: drain.stopping.aborted, stoppedBy: drain.stopping.aborted ? String(drain.stopping.reason) : undefined };
    const verdict = await judgeFailure(attempt, scene);
    settle(p, claim, brokeProcessAgain(p, claim, verdict) ?? verdict, ctx);
  } finally {
    inflight.delete(claim.id);
  }
}

/**
 * A module handler's code broke the process (handler.fatal: a throw in a timer callback, a
 * promise rejection left unhandled, process.exit from a timer): the run stops, and its
 * attempts still running at the end of the drain come here. Handed back uncharged, the item
 * whose code it was came back in every run, never charged nor dead-lettered, each run failing
 * at it. The async context of what broke it names that item (ProcessBroken.itemId): its
 * attempt, if still running, is charged; the others are handed back uncharged, however slow.
 * An item whose attempt had settled before its code broke the process (a timer left by an
 * attempt that failed) is charged by its own failures; none beside it is. (Charging every
 * attempt running, as after a crash, dead-lettered a good item that ran each time such a
 * settled culprit's timer fired; counting hand-backs, drains included, one slower than the
 * drain beside a running culprit.)
 */
function brokeProcessAgain(p: PassState, claim: Claim, verdict: FailureVerdict): FailureVerdict | undefined {
  const fatal = p.handler.fatal;
  if (verdict.kind !== 'release' || fatal?.aborted !== true) return undefined;
  const broke: unknown = fatal.reason;
  if (!(broke instanceof ProcessBroken) || broke.itemId !== claim.id) return undefined;
  return { kind: 'charge', message: `this item's handler code broke the process (${broke.message.replace(/^handler code /, '')})` };
}

/** Throws (a hand-back, uncharged) when the claim's lease may have run out: its output must not be committed. */
function leaseGuard(p: PassState, claim: Claim): void {
  if (!p.leaseLapsed(claim)) return;
  throw new HandlerFailure(
    `the claim's lease may have run out (no renewal reached the ledger for ${p.config.lease.seconds}s), so another pod may hold the item now: output not committed`,
    true,
  );
}

/** Charge, hand back, stop or forget, as the verdict says (judgeFailure, whereItWent). */
function settle(p: PassState, claim: Claim, verdict: FailureVerdict, ctx: AttemptContext): void {
  switch (verdict.kind) {
    case 'charge':
      p.results.fail(claim, verdict.message, p.retry);
      return;
    case 'gone':
      p.results.gone(claim);
      return;
    case 'release': {
      // Said once the ledger answered the hand-back: a write that fails leaves the claim to its
      // lease, charged; a fenced one handed nothing back (another owner had taken it over).
      const warn = verdict.warn;
      p.results.release(claim, verdict.reason, false, warn && ((a) => ctx.log.warn(a.result === 'fenced' ? { ...warn.fields, fence: a.reason } : warn.fields, handBackLine(warn.what, a.result))));
      return;
    }
    case 'stop':
      if (verdict.outputFull) p.scene.outputFullSeen = true;
      // A stop the item itself may cause, again and again (out of descriptors: a module
      // handler, the only handler code sharing cronsafe's descriptor table, that leaks them on
      // this input; exit 127 before any success) would stop every run at it, never
      // dead-lettered. Past retry.maxAttempts hand-backs (attempt minus charged) it is
      // charged; the pass still stops.
      if (verdict.recurring && (!verdict.recurring.moduleOnly || p.config.handler.module !== undefined) && claim.attempt - claim.charged >= p.retry.maxAttempts) {
        p.results.fail(claim, verdict.recurring.message, p.retry);
        p.stopForEnvironment(verdict.recurring.fault, verdict.recurring.note);
        return;
      }
      p.results.release(claim, verdict.reason, verdict.unstarted);
      p.stopForEnvironment(verdict.fault);
      return;
  }
}

/**
 * The handler's view of an item. For a plain id (valid UTF-8, no escapes) the path is the
 * text, and the bytes are made only if a handler asks for rawPath (a Buffer per item would
 * be pure garbage for the others). A class: its getter lives on the prototype, so every
 * item has one shape (an object literal with a getter costs more per item, measured).
 */
class PlainItem implements WorkItem {
  #raw: Buffer | undefined;
  constructor(
    readonly id: string,
    readonly path: string,
    readonly attempt: number,
  ) {}
  get rawPath(): Buffer {
    return (this.#raw ??= Buffer.from(this.path, 'utf8'));
  }
}

/** The item's path for our own file system calls: the text for a plain id (no Buffer made). */
const fsPath = (item: WorkItem): string | Buffer => (item instanceof PlainItem ? item.path : (item.rawPath ?? item.path));

function workItem(sourceDir: string, claim: Claim): WorkItem {
  if (isPlainId(claim.id)) {
    return new PlainItem(claim.id, sourceDir.endsWith(path.sep) ? sourceDir + claim.id : `${sourceDir}${path.sep}${claim.id}`, claim.attempt);
  }
  const where = itemPaths(sourceDir, claim.id);
  return { id: claim.id, path: where.text ?? where.raw.toString('utf8'), rawPath: where.raw, attempt: claim.attempt };
}

/**
 * What a handler gets for one attempt. A class, not an object literal with getters and
 * closures: one object per attempt, its signal and child logger made only when read.
 */
class AttemptContext implements HandlerContext {
  #outputs: OutputStore | undefined;
  #tempPath: string | undefined;
  /** Whether the handler was given its {output} path, whose directory was made then (OutputStore.makeAttemptDir). */
  outputGiven = false;
  #log: Logger | undefined;
  constructor(
    private readonly abort: AttemptSignal,
    private readonly parentLog: Logger,
    private readonly claim: Claim,
  ) {}
  setOutput(outputs: OutputStore, tempPath: string): void {
    this.#outputs = outputs;
    this.#tempPath = tempPath;
  }
  /** The attempt's temp path; its own directory is made when it is first read (a handler that never reads it pays nothing). */
  get outputPath(): string | undefined {
    if (this.#tempPath !== undefined && !this.outputGiven) {
      this.outputGiven = true;
      this.#outputs?.makeAttemptDir(this.#tempPath);
    }
    return this.#tempPath;
  }
  get signal(): AbortSignal {
    return this.abort.signal;
  }
  onAbort(fn: (reason: unknown) => void): () => void {
    return this.abort.onAbort(fn);
  }
  get log(): Logger {
    return (this.#log ??= this.parentLog.child({ itemId: this.claim.id, attempt: this.claim.attempt }));
  }
  get attempt(): number {
    return this.claim.attempt;
  }
}

/** Whether `there` is one of cronsafe's own files (by device and inode). A loop: no closure per attempt. */
function isOwnFile(own: readonly { dev: number; ino: number }[], there: Stats): boolean {
  for (const o of own) if (o.dev === there.dev && o.ino === there.ino) return true;
  return false;
}

/** The item's file as stat(2) sees it (following links), or undefined on any miss: never throws. */
function fileThere(file: string | Buffer): Stats | undefined {
  try {
    return statSync(file, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}
