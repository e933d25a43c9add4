/**
 * Which job a ledger belongs to. Items are keyed by id alone, so two jobs on one ledger
 * would take each other's done items as their own and reclaim each other's live claims.
 * The first job that opens a ledger records its `name` (an older ledger, with no name yet,
 * is adopted the same way); any other name is refused before anything is read or written.
 */

/** The `meta` row that holds the owning job's name (both adapters). */
export const JOB_KEY = 'job';
/** The `meta` row that holds the source directory of the job's last run (Ledger.recordSource). */
export const SOURCE_KEY = 'source';

/** Thrown by an adapter's open when the ledger is recorded as another job's. */
export class LedgerOwnedByAnotherJob extends Error {
  override name = 'LedgerOwnedByAnotherJob';
  constructor(
    /** The name recorded in the ledger. */
    readonly owner: string,
    /** The name that tried to open it. */
    readonly job: string,
  ) {
    super(`the ledger belongs to job ${JSON.stringify(owner)}, not ${JSON.stringify(job)}`);
  }
}

/**
 * Thrown by an adapter's open told not to adopt (a start that found the run lock held):
 * no job is recorded in the ledger yet. The run holding the lock is about to record its
 * own name, which may not be this job's: recorded by this start instead, the ledger became
 * the skipped job's, and the run that held it was refused (78) while the misconfigured job
 * exited 0, as a normal overlap does.
 */
export class LedgerNotOwnedYet extends Error {
  override name = 'LedgerNotOwnedYet';
  constructor() {
    super('no job is recorded in the ledger yet');
  }
}

/**
 * The outcome of comparing the recorded owner with the job opening the ledger: `adopt`
 * when nothing is recorded yet (the caller records `job`), else ok or a throw.
 */
export function checkJob(recorded: string | null | undefined, job: string): 'adopt' | 'ok' {
  if (recorded === null || recorded === undefined) return 'adopt';
  if (recorded !== job) throw new LedgerOwnedByAnotherJob(recorded, job);
  return 'ok';
}
