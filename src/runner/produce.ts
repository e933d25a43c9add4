import { setImmediate as yieldTurn } from 'node:timers/promises';
import type { PassState } from './pass-state.js';
import { batches, batchesOfChunks, readAhead, type ScanOptions, scanSourceChunks, sourcePresent } from './scan.js';

/** How many scanned items go to the ledger in the first discovery transaction of a pass. */
export const DISCOVER_BATCH = 256;

/**
 * The largest discovery transaction, unless the pass is shared (then every batch is
 * DISCOVER_BATCH: the pods' claims draw on each other's batches). A scan in the
 * directory's own order (hash order on ext4) inserts ids at random places in the id
 * index: a commit writes every index page its batch touched, so fewer, larger
 * transactions write each page once for several new ids (100,000 files: ~45% fewer
 * page writes; docs/benchmarks.md). 2,048 wrote fewer still, but raised the peak RSS of
 * a 1,000,000-file pass by ~3 MiB (more of each batch survives into the old generation).
 */
export const DISCOVER_BATCH_MAX = 1024;

/** Pending items of other passes forgotten per transaction at the end of a complete scan. */
export const FORGET_UNSEEN_BATCH = 10_000;

/**
 * The producer of a pass: scan lazily, record what is found (discover), and queue the ids
 * claimable now in the bounded channel. Closes the channel when done, however it ends.
 */
export async function produce(p: PassState): Promise<void> {
  const { drain, ledger, log, channel } = p;
  // When the scan began, for the missing-file walk (prune.ts): the earliest clock any of its
  // discovery batches read. Discovery leaves a done row alone whose seen mark is under a day
  // older than the batch's clock, and the walk marks one whose mark is over a day older than
  // this; a batch read behind the start (the clock stepped back) left rows alone that the
  // walk then marked missing, files the scan had just found.
  let scanStartedAt = p.now();
  const onUnreadable: ScanOptions['onUnreadable'] = (dir) => {
    p.skippedDirectories++;
    if (dir.changing) log.warn({ path: dir.path }, 'scan: a directory changed too much while it was read to finish its listing (its file system gives no entry types, and the entries read last were renamed or removed); its other items wait for the next run (the scan is partial)');
    else if (dir.link) log.warn({ path: dir.path, code: dir.code }, 'scan: skipped a link whose target it cannot reach; its item waits until it is reachable (the scan is partial)');
    else log.warn({ path: dir.path, code: dir.code }, 'scan: skipped a directory it cannot read; its items wait until it is readable (the scan is partial)');
  };
  const [first, most] = [DISCOVER_BATCH, p.shared ? DISCOVER_BATCH : DISCOVER_BATCH_MAX];
  const found = p.source ? batches(p.source, first, most) : batchesOfChunks(scanSourceChunks(p.config, drain.stopping, onUnreadable), first, most);
  // An item the ledger cannot hold (an id too long for PostgreSQL's index) is left out, said
  // on every run, rather than failing its batch and the run with it.
  // One recorded already (under a pass whose run group was shorter) is not marked seen: the
  // scan must then forget no unseen pending item, or its row went as if its file were gone.
  let refusedRecorded = false;
  const onRefused = (id: string, reason: string, recorded: boolean): void => {
    refusedRecorded ||= recorded;
    log.warn(
      { itemId: id, reason, recorded },
      'scan: left out an item the ledger cannot record (it is not processed); shorten its path, or use a ledger that can hold it (SQLite)',
    );
  };
  try {
    // The next batch is read while this one is recorded and sent (readAhead); a stop waits for no read.
    for await (const batch of readAhead(found, drain.stopping)) {
      if (drain.stopping.aborted) return;
      // Items attempted before (charged, or handed back) go behind the fresh ones (DiscoverOptions.deferCharged).
      const at = p.now();
      scanStartedAt = Math.min(scanStartedAt, at);
      const ids = await ledger.discover(batch, { runId: p.passId, now: at, refresh: p.refresh, deferCharged: !p.shared, recordOnClaim: p.shared, onRefused });
      p.scanned += batch.length;
      // The pods of a shared pass scan one directory in one order: each goes through a
      // batch from its own random place, or they would all offer their claims the same
      // candidates and mostly find them taken.
      const from = p.shared ? Math.floor(Math.random() * ids.length) : 0;
      for (let i = 0; i < ids.length; i++) {
        if (drain.stopping.aborted) return;
        const id = ids[(from + i) % ids.length]!;
        if (!channel.offer(id)) await channel.send(id);
      }
    }
    // The scan also ends early when the stop aborts it: that is not a complete scan.
    p.scanComplete = !drain.stopping.aborted;
    // Pending items a whole scan of the same source did not see were deleted since an
    // earlier run found them: forget them, or the backlog never reaches 0. Not after a
    // partial scan (their directory may be the unreadable one), nor when the source root
    // is no longer the directory the pass began with. A file that comes back is new.
    if (refusedRecorded) log.warn('scan: pending items it did not see are not forgotten this run: an item it left out is recorded in the ledger');
    if (p.scanComplete && !refusedRecorded && p.source === undefined && p.skippedDirectories === 0 && (await sourcePresent(p.config.source.directory, await p.sourceAtStart))) {
      // In steps of FORGET_UNSEEN_BATCH, each its own transaction, the event loop let run
      // between two (SQLite's are synchronous): a deleted backlog of a million items took
      // 45 s in one, deaf to SIGTERM and holding the write lock (`dead-letter retry`
      // failed). A stop leaves the rest to the next complete scan.
      let n = 0;
      for (;;) {
        await yieldTurn();
        if (drain.stopping.aborted) break;
        const step = await ledger.forgetUnseen(p.passId, FORGET_UNSEEN_BATCH);
        n += step;
        // Until a step finds none: a sibling pod of a shared pass forgetting the same rows
        // (PostgreSQL) makes a step short without the rest being done.
        if (step === 0) break;
      }
      if (n > 0) log.warn({ items: n, stopped: drain.stopping.aborted }, 'forgot pending items whose files are gone (a complete scan did not find them); not charged, not dead');
      if (!drain.stopping.aborted) p.wholeScan = { passId: p.passId, startedAt: scanStartedAt };
    }
  } catch (err) {
    // A send on the channel the stop closed is not an error.
    if (!drain.stopping.aborted) throw err;
  } finally {
    channel.close();
  }
}
