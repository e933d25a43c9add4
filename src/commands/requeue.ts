import picomatch from 'picomatch';
import { loadConfig } from '../config/load.js';
import { refusePseudoLedger } from '../config/filesystems.js';
import { coerceError, OutputClosed } from '../errors.js';
import { idGlob, includeMatcher, negatesWhole, regexReason, SLOW_EXTGLOB, slowExtglob } from '../globs.js';
import { openStore, type Store } from '../ledger/open.js';
import { reading, readingPages } from '../ledger/reading.js';
import type { FinishedFilter, FinishedState } from '../ledger/requeue-types.js';
import type { Ledger } from '../ledger/types.js';
import { GLOB_OPTIONS } from './requeue-options.js';
import { betweenPages, type MovedSoFar } from './moved-so-far.js';
import { namesTwoItems, resolveIds } from './dead-letter.js';
import { pushAfterChange } from './push-after.js';
import { Sink } from './sink.js';
import { pathCandidates, printableId, unknownId } from './status.js';

/** Which finished items `cronsafe requeue` puts back. Checked by the program (usage errors). */
export interface RequeueSelection {
  /** Exactly these ids; else every finished item that passes the filters below. */
  ids?: string[];
  /** Any of these globs over ids. */
  globs?: string[];
  /** Finished at or after. */
  doneAfter?: Date;
  /** Finished strictly before. */
  doneBefore?: Date;
  /** Dead items too (their time is when they were dead-lettered). */
  includeDead: boolean;
}

export interface RequeueOptions {
  dryRun: boolean;
  json: boolean;
  /** How many of the ids to show (default 10). */
  show?: number;
  /** Counts the pages moved, for a signal's note (cli.ts). */
  progress?: MovedSoFar;
}

/** The first of `globs` that picomatch refuses (an unbalanced bracket, brace or parenthesis), with why. */
export function badGlob(globs: string[]): { glob: string; reason: string } | undefined {
  for (const glob of globs) {
    // As source.include refuses it: a leading "!" selects every other item, so
    // `--glob 'a/**' --glob '!a/bad/**'` (the .gitignore way to leave some out) requeued
    // every finished item but a/bad's, a mass reprocess. `!(...)`, an extglob, is fine.
    if (negatesWhole(glob)) {
      return { glob, reason: 'a leading "!" selects every other item (globs are "any of", not .gitignore rules): name what to requeue; "!(...)" for "anything but" within one glob' };
    }
    const slow = slowExtglob(glob);
    if (slow !== undefined) return { glob, reason: `${SLOW_EXTGLOB} (${slow} can)` };
    try {
      // As the match reads it (idGlob): `[!]]` is a class, any character but `]`.
      // `debug`: a regular expression JavaScript refuses (`[z-a]`) is an error, not one that matches nothing.
      picomatch(idGlob(glob), { ...GLOB_OPTIONS, debug: true });
    } catch (err) {
      return { glob, reason: hint(regexReason(coerceError(err).message)) };
    }
  }
  return undefined;
}

const PAIR: Record<string, string> = { ']': '[', '[': ']', ')': '(', '(': ')', '}': '{', '{': '}' };

/**
 * picomatch's advice, `Missing closing: "]" - use "\\]" to match literal characters`, with
 * the escape of the character the glob holds alone: in a glob over ids `\\` is the id's text
 * of a backslash, so `\\]` taken as told matched a backslash, and the stray `[` stayed.
 */
function hint(message: string): string {
  const m = /^Missing (opening|closing): "(.)"/.exec(message);
  if (!m) return message;
  const stray = PAIR[m[2]!] ?? m[2]!;
  return `${m[0]} - write "\\${stray}" for a literal "${stray}"`;
}

/** Ids written to the ledger per transaction: a run in progress waits for one batch at most. */
const BATCH = 500;

/**
 * `cronsafe requeue`: finished items back to pending, re-run by the next pass (or by the
 * running one, if its scan already passed them). Pages through the ledger by id and moves
 * each page in its own transaction, whose guard re-checks the selection on each row: an
 * item claimed meanwhile is never touched, and a run in progress waits for one short
 * transaction at most. `--dry-run` opens the ledger read-only and only counts.
 */
export async function requeueCommand(configPath: string, sel: RequeueSelection, opts: RequeueOptions, out: NodeJS.WritableStream = process.stdout): Promise<number> {
  const config = loadConfig(configPath, { checkPaths: false });
  refusePseudoLedger(config);
  // Read-only first: a missing ledger is an error (as for status), never created here.
  const store = openStore(config);
  const reader = await store.openLedger({ readOnly: true });
  let ledger: Ledger = reader;
  try {
    if (!opts.dryRun) {
      await reader.close();
      ledger = await store.openLedger({ operator: true });
    }
    const show = opts.show ?? 10;
    const filter: FinishedFilter = {
      states: (sel.includeDead ? ['done', 'dead'] : ['done']) satisfies FinishedState[],
      after: sel.doneAfter?.getTime(),
      before: sel.doneBefore?.getTime(),
    };
    // A read that fails between two pages (the next page's, a peek) ends the command as a
    // write's failure does: saying how many the pages before it requeued.
    const result = await (sel.ids ? byIds(ledger, sel.ids, filter, opts, store) : byFilter(ledger, sel, filter, opts, show, store)).catch((err: unknown) => {
      throw opts.progress && err instanceof Error ? opts.progress.failed(err) : err;
    });
    opts.progress?.over();
    if (!opts.dryRun && result.count > 0) await pushAfterChange(config, ledger, 'requeue');
    const sink = new Sink(out);
    const meant = opts.json ? new Map<string, string>() : await meantIds(store, ledger, result, config.source.directory);
    try {
      await sink.write(opts.json ? `${JSON.stringify(jsonOf(result, opts.dryRun, show))}\n` : format(result, opts.dryRun, show, sel.includeDead, config.source.directory, meant));
      for (const glob of result.unmatchedGlobs ?? []) process.stderr.write(`cronsafe: requeue: ${notUtf8Glob(glob)}\n`);
      await sink.end();
    } catch (err) {
      throw opts.progress && err instanceof OutputClosed ? opts.progress.reportCut(err) : err;
    }
    return result.notMoved.length > 0 || (result.unmatchedGlobs ?? []).length > 0 ? 1 : 0;
  } finally {
    await ledger.close();
  }
}

export interface Outcome {
  count: number;
  /** The first ids moved (or that would be), in id order for a selection, as given for ids. */
  first: string[];
  /** Given ids that were not requeued, with their state (null: unknown). */
  notMoved: Array<{ id: string; state: string | null }>;
  /** Globs given in bytes that are not UTF-8 (read with U+FFFD) that matched no finished item (notUtf8Glob). */
  unmatchedGlobs?: string[];
}

/**
 * A `--glob` pasted in the raw bytes of a name that is not UTF-8 (`caf<0xE9>*`, from `ls` or a
 * shell's completion) reads with U+FFFD for each foreign byte and matches none of the items it
 * was meant for, whose ids write those bytes as `\xHH`: it requeued 0 items, exit 0, as if there
 * were none. One holding U+FFFD that matches nothing is said so (exit 1), as such an id is; one
 * that matches (a name really holding U+FFFD) is a glob like any other.
 */
const notUtf8Glob = (glob: string) =>
  `--glob ${printableId(glob)} matched no item: it held bytes that are not UTF-8 (read as U+FFFD), so it names none of the items whose names hold such bytes: give it as the listings print their ids, with \\xHH escapes (caf\\xe9*)`;

async function byFilter(ledger: Ledger, sel: RequeueSelection, filter: FinishedFilter, { dryRun, progress }: RequeueOptions, show: number, store: Store): Promise<Outcome> {
  // As source.include matches (globs.ts): a brace list's `*` takes no name the glob's dot does not write.
  const match = sel.globs && sel.globs.length > 0 ? includeMatcher(sel.globs) : () => true;
  const now = Date.now();
  let count = 0;
  const first: string[] = [];
  let unmatched = (sel.globs ?? []).filter((g) => g.includes('\uFFFD')).map((glob) => ({ glob, match: includeMatcher([glob]) }));
  for await (const page of readingPages(store, ledger.finishedPages(filter, BATCH))) {
    const ids = page.map((i) => i.id).filter((id) => match(id));
    if (unmatched.length > 0) unmatched = unmatched.filter((g) => !ids.some((id) => g.match(id)));
    const moved = dryRun ? ids : await write(ids.length, () => ledger.requeue(ids, filter, now), store, progress);
    count += moved.length;
    // In the page's id order, as --dry-run shows them: the ledger returns the moved rows in
    // its own order (SQLite: the order they were discovered in).
    if (first.length < show && moved.length > 0) {
      const wasMoved = new Set(moved);
      for (const id of ids) if (first.length < show && wasMoved.has(id)) first.push(id);
    }
    await betweenPages();
  }
  return { count, first, notMoved: [], unmatchedGlobs: unmatched.map((g) => g.glob) };
}

/** `requeue <id>...`: exported for its test (test/integration/requeue-ids-race.test.ts). */
export async function byIds(ledger: Ledger, ids: string[], filter: FinishedFilter, { dryRun, progress }: RequeueOptions, store: Store): Promise<Outcome> {
  // As the listings print them (plan, requeue --dry-run, dead-letter list): quoted ids are decoded.
  // An argument that is both an item's own id (a name in double quotes, as list --json gives
  // it) and the quoted listing form of another's moves neither: taken as the listing form, the
  // other item was requeued and the one asked for left as it was, exit 0.
  const { unique, ambiguous } = await resolveIds(store, ledger, ids);
  const moved = new Set<string>();
  // Why an id was not moved is its state when the requeue met it, read just before: read
  // after, an item claimed then (a run's attempt) and done since was "not requeued: done",
  // though done items are what requeue moves.
  const met = new Map<string, string>();
  for (let i = 0; i < unique.length; i += BATCH) {
    const batch = unique.slice(i, i + BATCH);
    if (!dryRun) for (const p of await reading(store, ledger.peek(batch))) met.set(p.id, p.state);
    const got = dryRun ? await wouldMove(ledger, batch, filter, store) : await write(batch.length, () => ledger.requeue(batch, filter, Date.now()), store, progress);
    for (const id of got) moved.add(id);
    await betweenPages();
  }
  const left = unique.filter((id) => !moved.has(id));
  const states = new Map((await reading(store, ledger.peek(left))).map((p) => [p.id, p.state]));
  // One that was requeueable when read before and was not moved changed in between (another
  // command moved it): its state now says what happened.
  const requeueable = (state: string | undefined) => state !== undefined && (filter.states as readonly string[]).includes(state);
  const stateOf = (id: string) => (met.has(id) && !requeueable(met.get(id)) ? met.get(id)! : states.get(id)) ?? null;
  return { count: moved.size, first: unique.filter((id) => moved.has(id)), notMoved: [...left.map((id) => ({ id, state: stateOf(id) })), ...ambiguous.map((id) => ({ id, state: AMBIGUOUS }))] };
}

/** The ids of `batch` a requeue would move now (the same rules as its guard). */
async function wouldMove(ledger: Ledger, batch: string[], filter: FinishedFilter, store: Store): Promise<string[]> {
  const ok = new Set<string>();
  for (const p of await reading(store, ledger.peek(batch))) {
    if (p.state !== 'done' && p.state !== 'dead') continue;
    if (!filter.states.includes(p.state)) continue;
    ok.add(p.id);
  }
  return batch.filter((id) => ok.has(id));
}

async function write(size: number, fn: () => Promise<string[]>, store: Store, progress: MovedSoFar | undefined): Promise<string[]> {
  const moving = () =>
    fn().catch((err: unknown) => {
      const failed = store.unavailable('cannot requeue', err);
      throw progress ? progress.failed(failed) : failed;
    });
  return progress ? progress.page(size, moving, (moved) => moved.length) : moving();
}

const plural = (n: number) => `${n} item${n === 1 ? '' : 's'}`;

/** For the unknown ids that are bare paths (`in/a.txt`): the known item each names (pathCandidates), for the hint. */
async function meantIds(store: Store, ledger: Ledger, r: Outcome, sourceDirectory: string): Promise<Map<string, string>> {
  const candidates = new Map<string, string[]>();
  for (const n of r.notMoved.slice(0, 20)) if (n.state === null) candidates.set(n.id, pathCandidates(n.id, sourceDirectory));
  const all = [...new Set([...candidates.values()].flat())];
  if (all.length === 0) return new Map();
  const known = new Set((await reading(store, ledger.peek(all))).map((p) => p.id));
  const meant = new Map<string, string>();
  for (const [id, ids] of candidates) {
    const found = ids.find((c) => known.has(c));
    if (found !== undefined) meant.set(id, found);
  }
  return meant;
}

function format(r: Outcome, dryRun: boolean, show: number, includeDead: boolean, sourceDirectory: string, meant: Map<string, string>): string {
  const lines = [dryRun ? `would requeue ${plural(r.count)} (dry run: nothing changed)` : `requeued ${plural(r.count)}: pending again, attempts reset`];
  for (const id of r.first.slice(0, show)) lines.push(`  ${printableId(id)}`);
  if (r.count > Math.min(show, r.first.length)) lines.push(`  ... and ${r.count - Math.min(show, r.first.length)} more`);
  if (r.notMoved.length > 0) {
    lines.push(`${r.notMoved.length} of the given ids ${r.notMoved.length === 1 ? 'was' : 'were'} not ${dryRun ? 'requeueable' : 'requeued'}:`);
    for (const n of r.notMoved.slice(0, 20)) lines.push(`  ${printableId(n.id)}: ${n.state === null ? unknownId(n.id, sourceDirectory, meant.get(n.id)) : why(n.state, includeDead, n.id)}`);
    if (r.notMoved.length > 20) lines.push(`  ... and ${r.notMoved.length - 20} more`);
  }
  return `${lines.join('\n')}\n`;
}

/** The state notRequeued gives an argument that names two items (resolveIds). */
const AMBIGUOUS = 'ambiguous';

function why(state: string, includeDead: boolean, id: string): string {
  if (state === AMBIGUOUS) return namesTwoItems(id);
  if (state === 'dead' && !includeDead) return 'dead (add --include-dead, or use dead-letter retry)';
  if (state === 'claimed') return 'claimed (an attempt is running; left alone)';
  if (state === 'pending') return 'pending already';
  return state;
}

const jsonOf = (r: Outcome, dryRun: boolean, show: number) => ({
  dryRun,
  count: r.count,
  first: r.first.slice(0, show),
  notRequeued: r.notMoved,
});
