import { loadConfig } from '../config/load.js';
import type { DeadItem } from '../ledger/types.js';
import { openStore } from '../ledger/open.js';
import { reading, readingPages } from '../ledger/reading.js';
import { MovedSoFar } from './moved-so-far.js';
import { pushAfterChange } from './push-after.js';
import { Sink } from './sink.js';
import { fromPrintableId, oneLine, printableId } from './status.js';

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

/** Dead items moved per transaction by `retry --all`, and the pause after each (as the SQLite ledger paged it). */
const RETRY_PAGE = 2000;
const PAUSE_MS = 10;

/** `cronsafe dead-letter retry ID... | --all`: dead -> pending with attempts reset. */
export async function deadLetterRetry(
  configPath: string,
  ids: string[],
  opts: { all: boolean },
  out: NodeJS.WritableStream = process.stdout,
  progress = new MovedSoFar('dead item'),
): Promise<number> {
  const config = loadConfig(configPath, { checkPaths: false });
  const store = openStore(config);
  // Read-only first, as requeue: a missing ledger is an error (as for status), never created here.
  await (await store.openLedger({ readOnly: true })).close();
  const ledger = await store.openLedger();
  // An id given twice is one item: counted twice, it would read as one that is not dead.
  const unique = [...new Set(ids.map(fromPrintableId))];
  try {
    // Each given id's state before the retry, so that the ones it leaves can be named with why.
    const before = opts.all ? new Map<string, string>() : new Map((await reading(store, ledger.peek(unique))).map((p) => [p.id, p.state]));
    const retry = (ids: string[] | 'all') =>
      progress.page(
        ids === 'all' ? undefined : ids.length,
        () =>
          ledger.retryDead(ids, Date.now()).catch((err: unknown) => {
            throw store.unavailable('cannot requeue', err);
          }),
        (n) => n,
      );
    let moved = 0;
    if (!opts.all) moved = await retry(unique);
    else {
      // A page at a time, as requeue (one transaction over a million dead rows held SQLite's
      // write lock past a running pass's busy timeout), so that a signal leaves the pages
      // before it moved and can say how many. Oldest first; a page's rows are no longer dead
      // once moved, and the next page starts after it (dead_at, id).
      for await (const page of readingPages(store, ledger.deadPages({ pageSize: RETRY_PAGE }))) {
        moved += await retry(page.map((d) => d.id));
        // Another process's writer (a running pass) takes SQLite's lock in between: its busy
        // wait polls, so a loop that took it again at once kept it waiting. A signal is seen here too.
        await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
      }
      // Those the pages could not name back (an id stored as bytes that are not UTF-8, put in
      // by hand: it reads back with U+FFFD) and those dead-lettered meanwhile, as before.
      moved += await retry('all');
    }
    progress.over();
    out.write(`requeued ${moved} dead item${moved === 1 ? '' : 's'}\n`);
    if (moved > 0) await pushAfterChange(config, ledger, 'dead-letter retry');
    if (!opts.all && moved < unique.length) {
      const notDead = unique.filter((id) => before.get(id) !== 'dead');
      const lines = [`${unique.length - moved} of the given ids were not dead letters:`];
      for (const id of notDead.slice(0, 20)) lines.push(`  ${printableId(id)}: ${whyNot(before.get(id))}`);
      if (notDead.length > 20) lines.push(`  ... and ${notDead.length - 20} more`);
      // Dead when read, no longer dead at the retry: another command retried or requeued them.
      const changed = unique.length - moved - notDead.length;
      if (changed > 0) lines.push(`  ${changed} more were dead when read, but retried or requeued by another command since`);
      out.write(`${lines.join('\n')}\n`);
      return 1;
    }
    return 0;
  } finally {
    await ledger.close();
  }
}

function whyNot(state: string | undefined): string {
  if (state === undefined) return 'unknown (not in the ledger)';
  if (state === 'claimed') return 'claimed (an attempt is running; not dead)';
  return `${state} (not dead)`;
}
