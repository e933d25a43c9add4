import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { backoffDelayMs } from '../backoff.js';
import { CHECK_CLIENT, clientConfig, execOn, portProblem, RETRY_BUDGET_MS, START_BUDGET_MS, type PostgresOptions } from './connection.js';
import { givenUpAtStart, isReadOnlyAnswer, isTransient, ledgerError, locatedLedgerState } from './errors.js';
import { LedgerOwnedByAnotherJob } from '../identity.js';
import { PassConfigDiffers, passConfigDiff, StoppedBeforeLock, stopName, type PassConfig } from '../run-lock.js';
import { migrate } from './migrate.js';
import { blockedWarning, type MigrationLockWait } from './migrate-lock.js';
import { ident, q, type Query } from './query.js';
import { coerceError, EdgeError, EXIT } from '../../errors.js';

/*
 * The run lock on PostgreSQL (docs/postgres.md, "Locking"). Two advisory locks keyed by
 * hashtext('<schema>.<name>'): sub-key 1 is the PASS lock, held by every pod of the
 * running pass in SHARED mode on a dedicated session for the whole run (the server drops
 * it when the session dies: no stale lock); sub-key 2 is the GATE, a transaction lock that
 * serialises the join decision. Under the gate a pod tries the pass lock EXCLUSIVELY:
 *   - it gets it: no pass is running. It records its run group in `run_lock`, takes the
 *     pass lock shared and drops the exclusive one: it started a pass.
 *   - it does not: a pass is running (someone holds it shared). `run_lock` names that
 *     pass's group (only an exclusive holder writes it): the same group joins (shared),
 *     any other group is an overlapping fire and is skipped.
 */

const lockKey = (schema: string, name: string): string => `${schema}.${name}`;

export const gateQuery = (schema: string, name: string): Query =>
  q(`SELECT pg_advisory_xact_lock(hashtext($1), 2)`, lockKey(schema, name));
export const tryExclusiveQuery = (schema: string, name: string): Query =>
  q(`SELECT pg_try_advisory_lock(hashtext($1), 1) AS ok`, lockKey(schema, name));
/** Taken while holding the exclusive lock: a session's own locks never conflict with each other. */
export const downgradeQuery = (schema: string, name: string): Query =>
  q(`SELECT pg_advisory_lock_shared(hashtext($1), 1), pg_advisory_unlock(hashtext($1), 1)`, lockKey(schema, name));
export const tryJoinQuery = (schema: string, name: string): Query =>
  q(`SELECT pg_try_advisory_lock_shared(hashtext($1), 1) AS ok`, lockKey(schema, name));
/**
 * The job's own mark, held shared beside the pass lock by every run in the pass: a 64-bit
 * key (the first 8 bytes of SHA-256 of '<schema>.<name>', in the one-bigint form: another
 * key space than the pass lock's two int4; computed here, so any server version takes it).
 * The pass lock's 32-bit hashtext of two jobs' '<schema>.<name>' can be the same (one pair
 * in ~2^32; found in seconds among generated names), and then each job skipped every fire
 * while the other ran, as 'held by another run group', holder 'unknown', counted as
 * overruns. Only told, not avoided: pods of an older cronsafe take the pass lock alone, so a
 * new key could not keep them out during an upgrade.
 */
const markKey = (schema: string, name: string): string =>
  BigInt.asIntN(64, BigInt(`0x${createHash('sha256').update(lockKey(schema, name)).digest('hex').slice(0, 16)}`)).toString();
export const markQuery = (schema: string, name: string): Query => q(`SELECT pg_advisory_lock_shared($1::bigint)`, markKey(schema, name));
const unmarkQuery = (schema: string, name: string): Query => q(`SELECT pg_advisory_unlock($1::bigint)`, markKey(schema, name));
/** Free only when no run of this job (of this cronsafe or later) holds the pass: the holder is another job's. */
export const markFreeQuery = (schema: string, name: string): Query => q(`SELECT pg_try_advisory_lock($1::bigint) AS ok`, markKey(schema, name));
/**
 * `retake`: the lock taken again mid-run (its session was cut), or by a pod of a Job whose
 * pass is over, keeps the owner that started the pass when the group is the same: a pod
 * joining later plans its fire by that run's start.
 */
export const recordGroupQuery = (schema: string, name: string, group: string, owner: string, now: number, retake = false, passConfig?: PassConfig): Query =>
  q(
    `INSERT INTO ${ident(schema)}.run_lock AS l (name, run_group, owner, acquired_at, pass_config) VALUES ($1, $2, $3, $4, $6::jsonb)
ON CONFLICT (name) DO UPDATE SET run_group = EXCLUDED.run_group,
  owner = CASE WHEN $5::boolean AND l.run_group = EXCLUDED.run_group THEN l.owner ELSE EXCLUDED.owner END,
  acquired_at = CASE WHEN $5::boolean AND l.run_group = EXCLUDED.run_group THEN l.acquired_at ELSE EXCLUDED.acquired_at END,
  pass_config = EXCLUDED.pass_config`,
    name,
    group,
    owner,
    now,
    retake,
    passConfig === undefined ? null : JSON.stringify(passConfig),
  );
/** The running pass's group, and when the run that started it (or took it again) started: null until it recorded its start. */
export const passGroupQuery = (schema: string, name: string): Query =>
  q(
    `SELECT l.run_group, l.owner, l.acquired_at, l.pass_config, (SELECT min(r.started_at) FROM ${ident(schema)}.runs AS r WHERE r.owner = l.owner) AS pass_started_at
FROM ${ident(schema)}.run_lock AS l WHERE l.name = $1`,
    name,
  );

/** A CRONSAFE_RUN_GROUP that names no group: the environment is misconfigured (exit 78). */
export class RunGroupError extends EdgeError {
  override name = 'RunGroupError';
  readonly exitCode = EXIT.CONFIG;
}

/**
 * The longest run group name taken, in UTF-8 bytes (a Job's name has at most 63). The index
 * of pending items (items_pending_pass) holds the group beside each id, in an entry of at
 * most 2,704 bytes: with a longer group, an id under the 2,048 bytes that always fit
 * (discover.ts) could not be recorded, and its batch failed every run (exit 1, nothing done).
 */
export const MAX_RUN_GROUP_BYTES = 255;

function notTooLong(variable: string, name: string): string {
  const bytes = Buffer.byteLength(name);
  if (bytes > MAX_RUN_GROUP_BYTES) {
    throw new RunGroupError(`${variable}: a run group of at most ${MAX_RUN_GROUP_BYTES} bytes, got ${bytes}: the ledger's index of pending items holds it beside each item's id; give a shorter name`);
  }
  return name;
}

/**
 * Which pods share a pass: `CRONSAFE_RUN_GROUP` (set it by hand), else the Job's name from
 * `CRONSAFE_JOB_NAME` (the chart sets it through the downward API) or `JOB_NAME`: the same
 * for every pod of one Job, different for every fire and every manual Job. Else the
 * scheduled time when one was given, else this run alone (exclusive, as with the flock).
 */
export function runGroup(env: NodeJS.ProcessEnv, scheduledTime: Date | undefined, owner: string): string {
  const named = env.CRONSAFE_RUN_GROUP;
  // Blanks only (`value: " "` in a pod spec) are no name: taken as one, every Job's pods
  // shared one group, and a fire joined the pass of the one before instead of being skipped.
  if (named && named.trim() === '') throw new RunGroupError(`CRONSAFE_RUN_GROUP: expected a run group name, got ${JSON.stringify(named)} (blanks only): unset it (the Job's name is then the group) or give a name`);
  if (named) return `group:${notTooLong('CRONSAFE_RUN_GROUP', named)}`;
  const job = env.CRONSAFE_JOB_NAME ? notTooLong('CRONSAFE_JOB_NAME', env.CRONSAFE_JOB_NAME) : env.JOB_NAME && notTooLong('JOB_NAME', env.JOB_NAME);
  if (job) return `job:${job}`;
  if (scheduledTime) return `occurrence:${scheduledTime.toISOString()}`;
  return `run:${owner}`;
}

/**
 * Whether the group is a Kubernetes Job's name as the chart gives it (CRONSAFE_JOB_NAME from
 * the Job's label, no CRONSAFE_RUN_GROUP): one fire's, never reused. Not `JOB_NAME`, which
 * other tools set to a name every build shares (Jenkins).
 */
export const groupIsOneJob = (env: NodeJS.ProcessEnv): boolean => !env.CRONSAFE_RUN_GROUP && Boolean(env.CRONSAFE_JOB_NAME);

export interface RunLockOptions extends PostgresOptions {
  /** config.name: the lock's identity. */
  name: string;
  group: string;
  /**
   * The group is one Job's (groupIsOneJob): a pod of it that starts after its pass ended
   * runs for that pass's fire (passStartedAt), not a later one.
   */
  oneJob?: boolean;
  owner: string;
  /**
   * The run's discovery-relevant config: recorded with the pass when this run starts it;
   * when it joins one, a pass recorded with another is refused (PassConfigDiffers).
   */
  passConfig?: PassConfig;
  /** How the server finds the session of a lost node. Default DEAD_CLIENT_PROBES. */
  probes?: KeepaliveProbes;
  /**
   * The run's stop (first SIGTERM): once it is aborted, a start whose lock cannot be had now
   * (the server down, or not answering its connect) stops trying: StoppedBeforeLock.
   */
  stop?: AbortSignal;
  /** The start's migration: told of the sessions it waits for (tryPostgresRunLock logs them). */
  migrationWait?: MigrationLockWait;
}

/** A connect still waiting this long after the stop is given up (a healthy server answers in ms). */
const STOPPED_CONNECT_GRACE_MS = 1_000;

/** A connect still pending STOPPED_CONNECT_GRACE_MS after the run's stop, given up. */
class ConnectGivenUp extends Error {
  constructor() {
    super(`the server did not answer the connect within ${STOPPED_CONNECT_GRACE_MS / 1000} s of the stop`);
  }
}

/**
 * `client.connect()`, given up (ConnectGivenUp) when still pending STOPPED_CONNECT_GRACE_MS
 * after `stop` aborts. (pg's own `end()` on a pending connect ends the socket but never
 * settles the connect's promise, so the connect is raced instead; the caller ends the client.)
 */
async function connectUnlessStopped(client: pg.Client, stop: AbortSignal | undefined): Promise<void> {
  const connecting = client.connect();
  if (stop === undefined) {
    await connecting;
    return;
  }
  connecting.catch(() => undefined); // given up: its late failure is nobody's
  let timer: NodeJS.Timeout | undefined;
  let arm: (() => void) | undefined;
  const givenUp = new Promise<never>((_, reject) => {
    arm = () => {
      timer = setTimeout(() => reject(new ConnectGivenUp()), STOPPED_CONNECT_GRACE_MS);
    };
    if (stop.aborted) arm();
    else stop.addEventListener('abort', arm, { once: true });
  });
  try {
    await Promise.race([connecting, givenUp]);
  } finally {
    clearTimeout(timer);
    if (arm) stop.removeEventListener('abort', arm);
  }
}

export interface PostgresRunLock {
  readonly group: string;
  /** True when this run joined a pass its group had already started. */
  readonly joined: boolean;
  /** When joined, or started again by a pod of the Job whose pass it was: when the run that started the pass started (RunLock.passStartedAt). */
  readonly passStartedAt?: number;
  /** When not joined: when this run took the lock exclusively (RunLock.startedPassAt). */
  readonly startedPassAt?: number;
  /** Aborted when the lock is gone for good: its session died and could not be re-taken. */
  readonly lost: AbortSignal;
  release(): Promise<void>;
}

type Attempt = { client: pg.Client; joined: boolean; passStartedAt?: number; startedPassAt?: number } | { client: null; holder: string; anotherJob?: boolean };

/**
 * The lock's session sits idle for the whole run. A server's `idle_session_timeout` (a
 * DBA's setting, PostgreSQL 14+) would cut it again and again, and each time the pass lock
 * is free until the session is back: another Job could start a pass in that window. So it
 * is off for this session; a server without the setting skips it (no error, as `SET` would give).
 * Its start is one transaction of several round trips (the migration's checks, the gate, the
 * decision), which a role's `transaction_timeout` (PostgreSQL 17+) as short as a DBA's guard
 * against forgotten transactions (a second or less) would end as surely: off too.
 * Asked of current_setting, not pg_settings: a DBA may revoke that view from PUBLIC.
 * Run before BEGIN, with the session's other settings, so that its transaction is as short
 * as it can be.
 */
const keepIdleSession = q(
  `SELECT (SELECT set_config('idle_session_timeout', '0', false) WHERE current_setting('idle_session_timeout', true) IS NOT NULL),
  (SELECT set_config('transaction_timeout', '0', false) WHERE current_setting('transaction_timeout', true) IS NOT NULL)`,
);

/**
 * Settings of the lock's session, given at connect (before any statement of it runs):
 * - `idle_in_transaction_session_timeout=0`: a role's short one (20 ms) ended the session
 *   between two statements of its start whenever the pod was slow to send the next (a loaded
 *   node): the start was retried until its budget ran out (exit 1 after ~5 s), or the lock
 *   taken again mid-run was lost (exit 75). The server ends no session of ours that is left
 *   idle in a transaction: a pod that dies closes it (or the keepalive probes find it gone).
 * - `lock_timeout=0`: the session's waits are for cronsafe's own advisory locks (the gate,
 *   another pod's migration), which a role's `lock_timeout` turned into failed starts while
 *   another pod migrated; the migration's DDL bounds its own waits (migrate-lock.ts).
 * A role's `statement_timeout` is kept: the first start's migration names it when it is too
 * short (errors.ts), and a wait it cancels is retried.
 */
const LOCK_SESSION = ['idle_in_transaction_session_timeout=0', 'lock_timeout=0'];

/**
 * A pod whose node is lost (powered off, cut from the network) never closes the lock's
 * session, and the idle session sends nothing: the server would hold the pass lock until its
 * TCP keepalive gave up, over two hours with the kernel's defaults, and skip every fire of the
 * job meanwhile. So the server probes this session after a minute of silence, every 10 s, and
 * ends it after 6 unanswered probes: about 2 minutes, longer than the retry budget and the
 * default lease, so a pod cut off that long has given up on its ledger calls, or had its
 * claims taken over, already. (The probes also keep a load balancer's idle timeout from
 * cutting the session.) Ignored on a Unix socket.
 */
export const DEAD_CLIENT_PROBES: KeepaliveProbes = { idleSeconds: 60, intervalSeconds: 10, count: 6 };

export interface KeepaliveProbes {
  idleSeconds: number;
  intervalSeconds: number;
  count: number;
}

/** tcp_user_timeout (PostgreSQL 12+, ms) covers a node lost while an answer to it was unacknowledged. */
const probeClient = (p: KeepaliveProbes): Query =>
  q(
    `SELECT set_config('tcp_keepalives_idle', $1, false), set_config('tcp_keepalives_interval', $2, false), set_config('tcp_keepalives_count', $3, false),
  (SELECT set_config('tcp_user_timeout', $4, false) WHERE current_setting('tcp_user_timeout', true) IS NOT NULL)`,
    String(p.idleSeconds),
    String(p.intervalSeconds),
    String(p.count),
    String((p.idleSeconds + p.intervalSeconds * p.count) * 1000),
  );

/** One try at the protocol on a fresh session; the session is kept only when it holds the lock. */
async function attempt(opts: RunLockOptions, retake: boolean): Promise<Attempt> {
  // Its own application_name: pg_stat_activity shows which session holds the run lock.
  const client = new pg.Client({ ...clientConfig(opts, LOCK_SESSION), application_name: 'cronsafe-lock' });
  client.on('error', () => undefined); // reported through 'end' below, or the failing query
  // Taking the lock again mid-run is the run's own business (it drains on `lost`).
  const stop = retake ? undefined : opts.stop;
  let waitingFor = 'the server';
  let cutByStop = false;
  let cutTimer: NodeJS.Timeout | undefined;
  const cut = (): void => {
    cutByStop = true;
    client.end().catch(() => undefined);
  };
  // As a connect: a start on a healthy server is done within it, and then drains as any run.
  const armCut = (): void => {
    cutTimer ??= setTimeout(cut, STOPPED_CONNECT_GRACE_MS);
  };
  const disarm = (): void => {
    clearTimeout(cutTimer);
    stop?.removeEventListener('abort', armCut);
  };
  try {
    const badPort = portProblem(client.port);
    if (badPort !== undefined) throw new Error(badPort);
    await connectUnlessStopped(client, stop);
    // A stop while the start waits on the server (for the migration's lock while another pod
    // migrates a large ledger, or for the gate) ends the session, if the start is still not
    // done STOPPED_CONNECT_GRACE_MS later: nothing is decided until COMMIT, and the start
    // waited on until the drain's last resort, the whole grace period, a pod that had nothing
    // in flight. Its statement then fails: StoppedBeforeLock below.
    if (stop?.aborted) armCut();
    else stop?.addEventListener('abort', armCut, { once: true });
    const exec = execOn(client);
    await exec(keepIdleSession);
    await exec(probeClient(opts.probes ?? DEAD_CLIENT_PROBES));
    // Cut by a stop (or killed) while it waits, the session's statement must not stay queued
    // on the server, holding a connection until the migration it waits for is over.
    await exec(q(CHECK_CLIENT));
    await exec(q('BEGIN'));
    // run_lock must exist at the start (a no-op once migrated). Not when taken again mid-run:
    // this run's start made the schema already, and a newer cronsafe's pod may have migrated
    // it since (a rolling upgrade), which migrate refuses: the lock was lost and the pass
    // drained at the first cut of its session (a failover).
    waitingFor = 'the ledger to be migrated (another pod may be migrating it)';
    if (!retake) await migrate(exec, opts.schema, undefined, opts.name, opts.migrationWait);
    waitingFor = 'the run lock (another pod of this job is taking it)';
    await exec(gateQuery(opts.schema, opts.name));
    const [ex] = await exec<{ ok: boolean }>(tryExclusiveQuery(opts.schema, opts.name));
    let result: Attempt;
    if (ex?.ok) {
      const startedPassAt = Date.now();
      // A pod of a Job whose pass is over (scheduled late, or the Job's replacement for a pod
      // that failed) runs for that Job's fire, as a joiner does: a Job's name is one fire's.
      const [ended] = !retake && opts.oneJob === true ? await exec<{ run_group: string; pass_started_at: number | null }>(passGroupQuery(opts.schema, opts.name)) : [];
      const again = ended?.run_group === opts.group;
      await exec(recordGroupQuery(opts.schema, opts.name, opts.group, opts.owner, startedPassAt, retake || again, opts.passConfig));
      await exec(downgradeQuery(opts.schema, opts.name));
      await exec(markQuery(opts.schema, opts.name));
      const passStartedAt = again ? (ended.pass_started_at ?? undefined) : undefined;
      result = { client, joined: false, startedPassAt, ...(passStartedAt !== undefined ? { passStartedAt } : {}) };
    } else {
      const [row] = await exec<{ run_group: string; owner: string; pass_config: PassConfig | null; pass_started_at: number | null }>(passGroupQuery(opts.schema, opts.name));
      // The same group with another config (a ConfigMap changed mid-Job) is refused before
      // it joins: nothing written, the transaction rolled back with the session. A pass
      // recorded without one (started by a cronsafe from before migration 006) is joined.
      if (row?.run_group === opts.group && row.pass_config && opts.passConfig) {
        const differs = passConfigDiff(opts.passConfig, row.pass_config);
        if (differs.length > 0) throw new PassConfigDiffers(opts.group, row.owner, differs, opts.passConfig, row.pass_config);
      }
      const [join] = row?.run_group === opts.group ? await exec<{ ok: boolean }>(tryJoinQuery(opts.schema, opts.name)) : [];
      const passStartedAt = row?.pass_started_at ?? undefined;
      if (join?.ok) {
        await exec(markQuery(opts.schema, opts.name));
        result = { client, joined: true, passStartedAt };
      } else {
        // Under the gate, so a run of this job that holds the pass has its mark already. (The
        // try takes the mark when free: let go at once, a starting pod of this job waits for it.)
        const [free] = await exec<{ ok: boolean }>(markFreeQuery(opts.schema, opts.name));
        if (free?.ok) await exec(unmarkQuery(opts.schema, opts.name));
        result = { client: null, holder: row ? `${row.run_group} (${row.owner})` : 'unknown', ...(free?.ok ? { anotherJob: true } : {}) };
      }
    }
    await exec(q('COMMIT'));
    disarm(); // the session now holds the run's lock
    if (result.client === null) await client.end().catch(() => undefined);
    return result;
  } catch (err) {
    disarm();
    const ending = client.end().catch(() => undefined);
    // pg's end() of a connect still pending waits for that connect's own timeout (10 s).
    if (!(err instanceof ConnectGivenUp)) await ending;
    if (cutByStop && stop) throw new StoppedBeforeLock(stopName(stop), new Error(`the start still waited for ${waitingFor}`));
    throw err;
  }
}

/** attempt(), retried on transient errors within `budgetMs`; errors come out scrubbed. */
async function attemptWithRetry(opts: RunLockOptions, budgetMs: number, retake = false): Promise<Attempt> {
  const started = Date.now();
  for (let n = 1; ; n++) {
    try {
      return await attempt(opts, retake);
    } catch (err) {
      const delay = backoffDelayMs(n, { backoffMs: 100, backoffMaxMs: 2_000 }, Math.random);
      if (err instanceof LedgerOwnedByAnotherJob || err instanceof StoppedBeforeLock || err instanceof PassConfigDiffers) throw err;
      const state = locatedLedgerState(err, 'take the run lock', opts.url, opts.schema);
      if (state) throw state;
      const stop = retake ? undefined : opts.stop;
      const stopped = (): StoppedBeforeLock => new StoppedBeforeLock(stopName(stop!), ledgerError(err, 'take the run lock', opts.url, opts.schema));
      if (stop?.aborted && (isTransient(err) || err instanceof ConnectGivenUp)) throw stopped();
      // Taken again mid-run, a read-only answer is a failover under way (the run's start wrote).
      const retryable = isTransient(err) || (retake && isReadOnlyAnswer(err));
      if (!retryable) throw ledgerError(err, 'take the run lock', opts.url, opts.schema);
      const spent = Date.now() - started;
      if (spent + delay > budgetMs) {
        // Said as every other retried call says it (connection.ts): without it, a run that
        // could not reach the server read as one refused at its first try.
        throw ledgerError(givenUpAtStart(err), 'take the run lock', opts.url, opts.schema, `gave up after ${n} attempt(s) over ${(spent / 1000).toFixed(1)} s: `);
      }
      await sleep(delay, undefined, { signal: stop }).catch(() => undefined); // a stop ends the wait
      if (stop?.aborted) throw stopped();
    }
  }
}

/**
 * Take the run lock, or null when a pass of another group is running (Forbid). If the
 * lock's session dies mid-run (database restart, failover) the lock is re-taken for the
 * same group; when that is impossible (another group got in, or the database stays away
 * for the retry budget) `lost` aborts, with the reason, and the run must drain.
 */
export async function tryPostgresRunLock(
  opts: RunLockOptions,
  onEvent: (msg: string, detail?: Record<string, unknown>) => void = () => undefined,
): Promise<PostgresRunLock | null> {
  const first = await attemptWithRetry({ migrationWait: { onBlocked: blockedWarning(opts.schema, onEvent) }, ...opts }, opts.startBudgetMs ?? START_BUDGET_MS);
  if (first.client === null) {
    if (first.anotherJob) {
      onEvent(
        `run lock held by no run of this job: its key, PostgreSQL's 32-bit hashtext('${lockKey(opts.schema, opts.name)}'), is the same as another job's in this database (a hash collision), so this job skips whenever that one runs; give this job another state.schema or name (or, during an upgrade, a run of an older cronsafe of this job holds it)`,
        { holder: 'another job (hash collision)' },
      );
    } else onEvent('run lock held by another run group', { holder: first.holder });
    return null;
  }
  const lost = new AbortController();
  let client: pg.Client | null = first.client;
  let released = false;

  const watch = (c: pg.Client): void => {
    c.once('end', () => {
      if (released || client !== c) return;
      client = null;
      onEvent('run lock session lost; taking the lock again', { group: opts.group });
      void retake();
    });
  };
  const retake = async (): Promise<void> => {
    try {
      const again = await attemptWithRetry(opts, opts.retryBudgetMs ?? RETRY_BUDGET_MS, true);
      if (released) {
        if (again.client) await again.client.end().catch(() => undefined);
        return;
      }
      if (again.client === null) {
        lost.abort(new Error(`run lock lost: while our session was cut off, ${again.holder} took the pass`));
        return;
      }
      client = again.client;
      watch(again.client);
      onEvent('run lock taken again', { group: opts.group, joined: again.joined });
    } catch (err) {
      lost.abort(new Error(`run lock lost: ${coerceError(err).message}`));
    }
  };
  watch(first.client);

  return {
    group: opts.group,
    joined: first.joined,
    ...(first.passStartedAt !== undefined ? { passStartedAt: first.passStartedAt } : {}),
    ...(first.startedPassAt !== undefined ? { startedPassAt: first.startedPassAt } : {}),
    lost: lost.signal,
    async release() {
      if (released) return;
      released = true;
      // Ending the session drops its session-level advisory locks.
      await client?.end().catch(() => undefined);
      client = null;
    },
  };
}
