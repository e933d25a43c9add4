import { loadConfig } from '../config/load.js';
import { OutputClosed } from '../errors.js';
import { refusePseudoLedger } from '../config/filesystems.js';
import { RETRY_DEAD_PAGE } from '../ledger/dead-pages.js';
import type { DeadItem, Ledger } from '../ledger/types.js';
import { openStore, type Store } from '../ledger/open.js';
import { reading, readingPages } from '../ledger/reading.js';
import { betweenPages, MovedSoFar } from './moved-so-far.js';
import { pushAfterChange } from './push-after.js';
import { Sink } from './sink.js';
import { escapeUnits } from '../terminal-safe.js';
import { fromPrintableId, oneLine, printableId, unknownId } from './status.js';

export interface ListOptions {
  json: boolean;
  /** At most this many (oldest first). */
  limit?: number;
  /** Only items dead-lettered at or after this instant. */
  since?: Date;
}

/**
 * `cronsafe dead-letter list`: dead items, oldest first, with their attempts and last
 * error. Streamed from the ledger page by page and written with backpressure, so memory
 * stays flat however many there are. `--json` is one JSON array, one element per line.
 */
export async function deadLetterList(configPath: string, opts: ListOptions, out: NodeJS.WritableStream = process.stdout): Promise<number> {
  const config = loadConfig(configPath, { checkPaths: false });
  refusePseudoLedger(config);
  const store = openStore(config);
  const ledger = await store.openLedger({ readOnly: true });
  const sink = new Sink(out);
  try {
    let n = 0;
    for await (const page of readingPages(store, ledger.deadPages({ limit: opts.limit, since: opts.since?.getTime() }))) {
      let text = '';
      for (const d of page) {
        if (opts.json) text += `${n === 0 ? '[\n' : ',\n'}  ${JSON.stringify(jsonOf(d))}`;
        else text += `${printableId(d.id)}\tattempts ${d.attempts}\t${oneLine(d.lastError)}\n`;
        n++;
      }
      await sink.write(text);
      // On SQLite a page's read is synchronous, and into a file or a terminal (written
      // synchronously) so is its write: without a turn of the event loop here, Ctrl-C on a
      // long listing was only handled once every line was printed (requeue does the same).
      await betweenPages();
    }
    if (opts.json) await sink.write(n === 0 ? '[]\n' : '\n]\n');
    else if (n === 0) await sink.write('no dead letters\n');
    await sink.end();
    return 0;
  } finally {
    await ledger.close();
  }
}

const jsonOf = (d: DeadItem) => ({
  id: d.id,
  attempts: d.attempts,
  lastError: d.lastError,
  deadAt: d.deadAt == null ? null : new Date(d.deadAt).toISOString(),
});

/** `cronsafe dead-letter retry ID... | --all`: dead -> pending with attempts reset. */
export async function deadLetterRetry(
  configPath: string,
  ids: string[],
  opts: { all: boolean },
  out: NodeJS.WritableStream = process.stdout,
  progress = new MovedSoFar('dead item'),
): Promise<number> {
  const config = loadConfig(configPath, { checkPaths: false });
  refusePseudoLedger(config);
  const store = openStore(config);
  // Read-only first, as requeue: a missing ledger is an error (as for status), never created here.
  await (await store.openLedger({ readOnly: true })).close();
  const ledger = await store.openLedger({ operator: true });
  try {
    const { unique, ambiguous } = await resolveIds(store, ledger, ids);
    // Each given id's state before the retry, so that the ones it leaves can be named with why.
    const before = opts.all ? new Map<string, string>() : new Map((await reading(store, ledger.peek(unique))).map((p) => [p.id, p.state]));
    const failed = (err: unknown): never => {
      throw progress.failed(store.unavailable('cannot requeue', err));
    };
    // `--all`: the ledger moves a page per transaction and says so after each, so that a
    // signal between pages leaves those before it moved and can say how many. On SQLite a
    // page is written synchronously, so a signal is only ever handled between two pages:
    // none is in flight then, and the count is exact (as requeue's); on PostgreSQL one may be.
    const inFlight = config.state.postgres !== undefined ? RETRY_DEAD_PAGE : 0;
    const moved = opts.all
      ? await progress.pages(inFlight, (onPage) => ledger.retryDead('all', Date.now(), onPage).catch(failed))
      : await progress.page(unique.length, () => ledger.retryDead(unique, Date.now()).catch(failed), (n) => n);
    progress.over();
    if (moved > 0) await pushAfterChange(config, ledger, 'dead-letter retry');
    const { text, code } = retryReport(moved, unique, ambiguous, opts.all, before, config.source.directory);
    // Through a Sink, as every report: a reader that left (`| true`) is said with what the retry did.
    const sink = new Sink(out);
    try {
      await sink.write(text);
      await sink.end();
    } catch (err) {
      throw err instanceof OutputClosed ? progress.reportCut(err) : err;
    }
    return code;
  } finally {
    await ledger.close();
  }
}

/** What `dead-letter retry` says, and its exit code: 1 when a given id was left as it was. */
function retryReport(
  moved: number,
  unique: string[],
  ambiguous: string[],
  all: boolean,
  before: Map<string, string>,
  sourceDirectory: string,
): { text: string; code: number } {
  const lines = [`requeued ${moved} dead item${moved === 1 ? '' : 's'}`];
  if (ambiguous.length > 0) {
    lines.push(`${ambiguous.length} of the given ids named two items, and neither was requeued:`);
    // As requeue names it: raw, an argument's C1 control (U+009B, a CSI) or bidirectional
    // one (from `list --json | jq -r`, which decodes the escapes) reached the terminal.
    for (const arg of ambiguous) lines.push(`  ${printableId(arg)}: ${namesTwoItems(arg)}`);
  }
  if (all || moved === unique.length) return { text: `${lines.join('\n')}\n`, code: ambiguous.length > 0 ? 1 : 0 };
  const notDead = unique.filter((id) => before.get(id) !== 'dead');
  const notMoved = unique.length - moved;
  lines.push(notMoved === 1 ? '1 of the given ids was not a dead letter:' : `${notMoved} of the given ids were not dead letters:`);
  for (const id of notDead.slice(0, 20)) lines.push(`  ${printableId(id)}: ${whyNot(id, before.get(id), sourceDirectory)}`);
  if (notDead.length > 20) lines.push(`  ... and ${notDead.length - 20} more`);
  // Dead when read, no longer dead at the retry: another command retried or requeued them.
  const changed = notMoved - notDead.length;
  if (changed > 0) lines.push(`  ${changed} more ${changed === 1 ? 'was' : 'were'} dead when read, but retried or requeued by another command since`);
  return { text: `${lines.join('\n')}\n`, code: 1 };
}

/**
 * The ids of `args`, as the listings print them (fromPrintableId), an id given twice once.
 * An argument that reads as a quoted listing form (`"sp ace"` for sp ace) may also be an
 * item's own id, as `list --json` gives it (a file named with the quotes): then it is that
 * item when the decoded one is not in the ledger, and `ambiguous` when both are (taken as
 * the decoded one, the item asked for stayed dead and another was requeued, exit 0).
 */
export async function resolveIds(store: Store, ledger: Ledger, args: string[]): Promise<{ unique: string[]; ambiguous: string[] }> {
  const quoted = [...new Set(args.filter((a) => fromPrintableId(a) !== a))];
  const present = new Set(quoted.length === 0 ? [] : (await reading(store, ledger.peek([...quoted, ...quoted.map(fromPrintableId)]))).map((p) => p.id));
  const ambiguous = quoted.filter((a) => present.has(a) && present.has(fromPrintableId(a)));
  const idOf = (a: string): string => (present.has(a) && !present.has(fromPrintableId(a)) ? a : fromPrintableId(a));
  // An id given twice is one item: counted twice, it would read as one that is not dead.
  return { unique: [...new Set(args.filter((a) => !ambiguous.includes(a)).map(idOf))], ambiguous };
}

/** Why an ambiguous argument (resolveIds) moved neither item, and how to name each alone. */
export function namesTwoItems(arg: string): string {
  return `both the item named so (quotes and all: give ${printableId(arg)}) and the one a listing prints so (give ${otherQuoting(fromPrintableId(arg))} for that one)`;
}

/**
 * `id` JSON-quoted with its first character as a \\u escape: read back as id, never as the
 * argument it differs from. The rest with all but printable ASCII escaped too: raw, a C1
 * control or a bidirectional one in it reached the terminal (printableId escapes them).
 */
const otherQuoting = (id: string): string =>
  `"\\u${id.charCodeAt(0).toString(16).padStart(4, '0')}${JSON.stringify(id.slice(1)).slice(1).replace(/[^\u0020-\u007e]/gu, escapeUnits)}`;

function whyNot(id: string, state: string | undefined, sourceDirectory: string): string {
  if (state === undefined) return unknownId(id, sourceDirectory);
  if (state === 'claimed') return 'claimed (an attempt is running; not dead)';
  return `${state} (not dead)`;
}
