/**
 * The start journal: an append-only file beside the SQLite ledger (`<ledger>-starts`) that
 * records, before each handler starts, that its attempt started, and, when it succeeded,
 * that it did. The ledger writes those records to SQLite in batches (write-behind.ts), one
 * transaction per few hundred attempts instead of one per slot batch; the journal is what
 * makes that safe. A record is one write(2): once it returns, the record is in the page
 * cache and survives a SIGKILL of the process, as a SQLite WAL commit (synchronous=NORMAL)
 * does. The next run replays the file into the ledger before it reclaims anything, so a
 * crash still charges exactly the attempts that started, and loses no success.
 *
 * Format, one record per line (ids as JSON strings, so any byte of a name is safe):
 *   O <owner>                  the run writing the records below (JSON string)
 *   S <id> <attempt> <at>      attempt <attempt> of <id> started at <at> (epoch ms)
 *   D <id> <attempt> <at>      that attempt succeeded
 * Fields are tab-separated. A torn last line (a crash mid-write) is ignored: its handler
 * had not started (or its success is simply redone).
 */
import { closeSync, ftruncateSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';

export interface JournalStart {
  id: string;
  owner: string;
  attempt: number;
  at: number;
}

export interface JournalRecords {
  starts: JournalStart[];
  done: JournalStart[];
}

/** The journal's path for a ledger file. */
export const journalPath = (ledgerFile: string): string => `${ledgerFile}-starts`;

export class StartJournal {
  #fd: number | undefined;
  #owner: string | undefined;

  constructor(readonly file: string) {}

  get opened(): boolean {
    return this.#fd !== undefined;
  }

  /** Append records for `owner`'s attempts; returns once they are written (not fsynced). */
  append(owner: string, starts: readonly { id: string; attempt: number }[], done: readonly { id: string; attempt: number }[], at: number): void {
    let text = '';
    if (this.#owner !== owner) text += `O\t${JSON.stringify(owner)}\n`;
    for (const d of done) text += `D\t${JSON.stringify(d.id)}\t${d.attempt}\t${at}\n`;
    for (const s of starts) text += `S\t${JSON.stringify(s.id)}\t${s.attempt}\t${at}\n`;
    if (text === '') return;
    this.#fd ??= openSync(this.file, 'a', 0o600);
    const buf = Buffer.from(text, 'utf8');
    // write(2) on a regular file writes everything or fails (ENOSPC, EIO); loop anyway.
    for (let off = 0; off < buf.length; ) off += writeSync(this.#fd, buf, off);
    this.#owner = owner;
  }

  /** Everything recorded is in the ledger now: start over (O_APPEND writes go to offset 0). */
  clear(): void {
    if (this.#fd === undefined) return;
    ftruncateSync(this.#fd, 0);
    this.#owner = undefined;
  }

  /**
   * Close; `remove`: the file holds nothing of ours any more (a clean end). Only a journal
   * this connection wrote is removed: another connection's (a running pass's) is not ours.
   */
  close(remove: boolean): void {
    const mine = this.#fd !== undefined;
    if (this.#fd !== undefined) closeSync(this.#fd);
    this.#fd = undefined;
    this.#owner = undefined;
    if (remove && mine) removeJournal(this.file);
  }
}

/** What a journal left by a run that died holds; empty when there is none. */
export function readJournal(file: string): JournalRecords {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { starts: [], done: [] };
    throw err;
  }
  const out: JournalRecords = { starts: [], done: [] };
  let owner: string | undefined;
  const lines = text.split('\n');
  lines.pop(); // after the last '\n': empty, or a torn record
  for (const line of lines) {
    const f = line.split('\t');
    try {
      if (f[0] === 'O' && f.length === 2) {
        owner = JSON.parse(f[1]!) as string;
        continue;
      }
      if ((f[0] === 'S' || f[0] === 'D') && f.length === 4 && owner !== undefined) {
        const rec = { id: JSON.parse(f[1]!) as string, owner, attempt: Number(f[2]), at: Number(f[3]) };
        if (typeof rec.id === 'string' && Number.isSafeInteger(rec.attempt) && Number.isFinite(rec.at)) {
          (f[0] === 'S' ? out.starts : out.done).push(rec);
        }
      }
    } catch {
      /* a damaged line (an OS crash can leave one): skip it, the rest stands */
    }
  }
  return out;
}

export function removeJournal(file: string): void {
  try {
    unlinkSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}
