import path from 'node:path';
import { PATH_MAX } from '../config/check-paths.js';
import { loadConfig } from '../config/load.js';
import { refusePseudoLedger } from '../config/filesystems.js';
import type { DeadItem, ItemCounts, RunRecord } from '../ledger/types.js';
import { openStore } from '../ledger/open.js';
import { reading } from '../ledger/reading.js';
import { climbsOut, whereItIs } from '../real-path.js';
import { escapeUnits, INVISIBLE } from '../terminal-safe.js';
import { Sink } from './sink.js';

export interface StatusReport {
  job: string;
  items: ItemCounts;
  /** Items ever put back to pending by `requeue` or `dead-letter retry` (monotonic). */
  requeued: number;
  recentRuns: RunRecord[];
  deadLetters: DeadItem[];
}

/**
 * `cronsafe status`: item counts by state, recent runs, the first dead letters. Reads the
 * ledger without writing it (works on a read-only state directory); its memory is bounded
 * by the 10 runs and 20 dead letters it shows, whatever the size of the ledger.
 */
export async function statusCommand(configPath: string, opts: { json: boolean }, out: NodeJS.WritableStream = process.stdout): Promise<number> {
  const config = loadConfig(configPath, { checkPaths: false });
  refusePseudoLedger(config);
  const store = openStore(config);
  const ledger = await store.openLedger({ readOnly: true });
  try {
    const report: StatusReport = {
      job: config.name,
      items: await reading(store, ledger.counts()),
      requeued: (await reading(store, ledger.totals())).requeued,
      recentRuns: await reading(store, ledger.recentRuns(10)),
      deadLetters: await reading(store, ledger.listDead(20)),
    };
    const sink = new Sink(out);
    const takenBack = config.state.postgres !== undefined ? { leaseSeconds: config.lease.seconds } : undefined;
    // Unfinished runs' last heartbeats: a run killed outright never records its end, and
    // only the next run marks it died; until then "running" would be said of it for hours.
    const beats = report.recentRuns.some((r) => r.outcome === null) && !opts.json ? await reading(store, ledger.beatingRuns(0)) : [];
    const silent = { heartbeats: new Map(beats.map((b) => [b.runId, b.heartbeatAt])), before: Date.now() - config.lease.seconds * 1000, leaseSeconds: config.lease.seconds };
    await sink.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : formatStatus(report, takenBack, silent));
    await sink.end();
    return 0;
  } finally {
    await ledger.close();
  }
}

/** A time from the ledger; one no Date holds (a row written by hand: past year 275760) is shown as its number, not a crash. */
const iso = (ms: number | null): string => (ms == null ? '-' : Number.isFinite(new Date(ms).getTime()) ? new Date(ms).toISOString() : String(ms));

/**
 * What a state means, where it is not obvious (issue 9: a claim is a started attempt).
 * `postgres`: a dead run's claims are taken back only once their lease has run out (a claim
 * of another owner may be a live sibling's), by a sibling of the pass or the next run; on
 * SQLite the next run takes them back at its start (the run lock proves their run is gone).
 */
function stateNotes(postgres?: { leaseSeconds: number }): Record<string, string> {
  const back = postgres
    ? `taken back once their lease (lease.seconds: ${postgres.leaseSeconds}) has run out, by a pod of the pass or the next run`
    : 'the next run takes them back';
  return { claimed: `   (attempts running now, or left running by a run that died: ${back})` };
}

/** Unfinished runs' last heartbeats (epoch ms), and the time before which one is silent (lease.seconds ago). */
export interface Heartbeats {
  heartbeats: Map<string, number>;
  before: number;
  leaseSeconds: number;
}

export function formatStatus(r: StatusReport, postgres?: { leaseSeconds: number }, silent?: Heartbeats): string {
  const lines = [`job ${r.job}`, '', 'items'];
  const notes = stateNotes(postgres);
  for (const [state, n] of Object.entries(r.items)) lines.push(`  ${state.padEnd(8)} ${String(n).padStart(10)}${notes[state] ?? ''}`);
  if (r.requeued > 0) lines.push(`  requeued ${String(r.requeued).padStart(10)}   (ever, by requeue or dead-letter retry)`);
  lines.push('', 'recent runs');
  if (r.recentRuns.length === 0) lines.push('  (none)');
  for (const run of r.recentRuns) {
    const beat = run.outcome === null ? silent?.heartbeats.get(run.runId) : undefined;
    if (beat !== undefined && beat < silent!.before) {
      const note = `(no heartbeat since ${iso(beat)}, over lease.seconds (${silent!.leaseSeconds}) ago: it may have died; the next run records it as died)`;
      lines.push(ledgerText(`  ${iso(run.startedAt)}  ${'running?'.padEnd(14)} ${note}  ${run.runId}`));
      continue;
    }
    lines.push(ledgerText(`  ${iso(run.startedAt)}  ${(run.outcome ?? 'running').padEnd(14)} ${runCounts(run)}  ${run.runId}`));
  }
  lines.push('', `dead letters${r.items.dead > r.deadLetters.length ? ` (first ${r.deadLetters.length} of ${r.items.dead})` : ''}`);
  if (r.deadLetters.length === 0) lines.push('  (none)');
  for (const d of r.deadLetters) lines.push(`  ${printableId(d.id)}  attempts ${d.attempts}  ${oneLine(d.lastError)}`);
  return `${lines.join('\n')}\n`;
}

/**
 * A run's counts as it recorded them at its end. A run still going, or one that never
 * recorded its end (marked `died`), has none: "done 0" would say it did nothing.
 */
function runCounts(run: RunRecord): string {
  if (run.outcome === null) return '(counts when it ends)';
  if (run.outcome === 'died' && !run.counts) return '(no counts: it never recorded its end)';
  const c = run.counts ?? {};
  return `done ${c.succeeded ?? 0}  failed ${c.failed ?? 0}  dead ${c.deadLettered ?? 0}`;
}

// INVISIBLE (terminal-safe.ts): the characters a terminal does not show.
const PLAIN_ID = new RegExp(`^[^\\s"'\\u0000-\\u001f\\u007f-\\u009f${INVISIBLE}]+$`, 'u');
// In a quoted id, the blanks other than the space too (no-break, em, ideographic ...; a line
// separator): raw, `"a<NBSP>b"` read as `"a b"`, another id.
const ESCAPED_IN_JSON = new RegExp(`[\\u007f-\\u009f${INVISIBLE}\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]`, 'gu');
// After JSON.stringify (which escapes C0 but leaves DEL raw): all but printable ASCII.
const NOT_PRINTABLE_ASCII = /[^\u0020-\u007e]/gu;
const ESCAPED_IN_LINE = new RegExp(`[\\u0000-\\u001f\\u007f-\\u009f${INVISIBLE}]`, 'gu');

/**
 * A line of a run's row (its id, outcome and counts, as the ledger holds them) with every
 * control and INVISIBLE character as a JSON escape: anyone who can write a shared ledger
 * fills those rows, and raw, a run id's `ESC [2J` cleared the operator's screen.
 */
const ledgerText = (line: string): string => line.replace(ESCAPED_IN_LINE, escapeUnits);

/**
 * A last error as one line of text: whitespace runs become one space, and the other control
 * characters are shown as JSON escapes (`\u001b`), as printableId shows them in ids. Raw, a
 * handler's colored stderr, a title-setting escape or backspaces would drive the operator's
 * terminal (hiding or rewriting what the listing says). So are the INVISIBLE characters
 * (bidirectional controls, zero-width ones). `--json` keeps the text exactly.
 */
export function oneLine(s: string | null, max = 160): string {
  if (!s) return '';
  const flat = s
    .replace(/\s+/g, ' ')
    .trim()
    .replace(ESCAPED_IN_LINE, escapeUnits);
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/**
 * An id as text an operator can paste back into `dead-letter retry`: as stored when it has
 * no space, quote or control character (escaped ids, `a\\b`, included), else JSON-quoted,
 * with DEL and the C1 controls escaped too (JSON.stringify leaves them raw; `\u009b` is a
 * CSI to some terminals), and the INVISIBLE characters: raw, `invoice<RLO>gpj.exe` showed
 * as `invoiceexe.jpg`, and `a<ZWSP>.txt` as `a.txt`, another item's id. One that starts with a dash gets `./` before it, as `rm ./-f`
 * does: pasted bare, `--all` was the option (every dead item requeued) and `-a.scc` an
 * unknown one (exit 2). An id not in NFC is quoted with all but ASCII escaped (`"cafe\u0301"`):
 * raw, it looked like its NFC twin. No id starts with `./`. fromPrintableId reads it back.
 */
export function printableId(id: string): string {
  // A name in another Unicode normal form than NFC (from a Mac: `e` and a combining U+0301)
  // is drawn as its NFC twin, another item: every character past ASCII escaped, so that each
  // form of a name prints differently (the NFC one, as typed, bare) and reads back.
  if (id !== id.normalize('NFC')) return JSON.stringify(id).replace(NOT_PRINTABLE_ASCII, escapeUnits);
  if (!PLAIN_ID.test(id)) return JSON.stringify(id).replace(ESCAPED_IN_JSON, escapeUnits);
  return id.startsWith('-') ? `./${id}` : id;
}

/**
 * Why a given id is not in the ledger, as `dead-letter retry` and `requeue` say it. Node reads an
 * argument in bytes that are not UTF-8 (pasted from `ls`, a shell's completion of the source
 * file) with U+FFFD for each foreign byte, so it names no item: such a name's id is written with
 * `\xHH` escapes, as the listings print it. (An id really holding U+FFFD is found, never unknown.)
 * An argument written as a path (the log's absolute `path`, a shell's `./a.txt` in the source
 * directory) names no item either, as ids are relative to source.directory: the id it means is given.
 */
export function unknownId(id: string, sourceDirectory: string, known?: string): string {
  const unknown = 'unknown (not in the ledger)';
  // A bare path from the working directory or from the source's parent (`in/a.txt`) that names a known item (pathCandidates).
  if (known !== undefined) return `${unknown}: ids are relative to source.directory (${printableId(sourceDirectory)}): did you mean ${printableId(known)}?`;
  if (id.includes('\uFFFD')) return `${unknown}: the argument held bytes that are not UTF-8 (read as U+FFFD): give the id as the listings print it, with \\xHH escapes (caf\\xe9.scc)`;
  const asPath = idOfPath(id, sourceDirectory);
  if (asPath === undefined) return unknown;
  const where = `ids are relative to source.directory (${printableId(sourceDirectory)})`;
  return asPath === null ? `${unknown}: ${where}, and this path (from the working directory) is outside it` : `${unknown}: ${where}: give ${printableId(asPath)}`;
}

/**
 * The ids a bare relative argument (no leading `/`, `./`, `../`: `in/a.txt`) may have meant,
 * taken as a path from the working directory or from source.directory's parent: `requeue
 * in/a.txt`, run beside the source, said only "unknown". The caller keeps the ones the
 * ledger knows.
 */
export function pathCandidates(arg: string, sourceDirectory: string): string[] {
  if (arg === '' || arg.startsWith('/') || arg.startsWith('./') || arg.startsWith('../')) return [];
  const out = new Set<string>();
  for (const from of [() => path.resolve(arg), () => path.join(path.dirname(sourceDirectory), arg)]) {
    let given: string;
    try {
      given = from();
    } catch {
      continue; // the working directory is gone
    }
    if (Buffer.byteLength(given) >= PATH_MAX) continue;
    const rel = path.relative(sourceDirectory, given);
    if (rel !== '' && !climbsOut(rel) && rel !== arg) out.add(rel);
  }
  return [...out];
}

/** The id an argument written as a path (from the working directory, as a shell means it) names; null: a path outside the source; undefined: no path. */
function idOfPath(arg: string, sourceDirectory: string): string | null | undefined {
  if (!arg.startsWith('/') && !arg.startsWith('./') && !arg.startsWith('../')) return undefined;
  const within = (dir: string, p: string): string | null => {
    const rel = path.relative(dir, p);
    return rel === '' || climbsOut(rel) ? null : rel;
  };
  let given: string;
  try {
    given = path.resolve(arg);
  } catch {
    return undefined; // the working directory is gone
  }
  // No file has a longer path. Followed through links a directory at a time, a pasted
  // `./a/a/.../x` of 100 KiB overflowed the stack (a crash, exit 1), or took minutes.
  if (Buffer.byteLength(given) >= PATH_MAX) return undefined;
  // Else through links as the scan sees them: a source reached by a link, or given so.
  return within(sourceDirectory, given) ?? within(whereItIs(sourceDirectory), whereItIs(given));
}

/**
 * An id as a text listing printed it (`dead-letter list`, `plan`, `requeue --dry-run`):
 * `./-a.scc` is `-a.scc`; JSON-quoted (printableId) when it holds a space, quote or control character, so a pasted
 * `"new\nline.txt"` means the id with a newline. Only when the listing would have quoted
 * what is inside: `"a.txt"` is the id with its quotes (as `--json` gives it), never a.txt,
 * which a listing prints bare; taken as a.txt, it would move another item and say so.
 */
export function fromPrintableId(arg: string): string {
  if (arg.startsWith('./-') && printableId(arg.slice(2)) === arg) return arg.slice(2);
  if (arg.length < 2 || !arg.startsWith('"') || !arg.endsWith('"')) return arg;
  try {
    const id: unknown = JSON.parse(arg);
    return typeof id === 'string' && printableId(id).startsWith('"') ? id : arg;
  } catch {
    return arg;
  }
}
