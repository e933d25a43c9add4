import { loadConfig } from '../config/load.js';
import { refusePseudoLedger } from '../config/filesystems.js';
import { dryRun, PLAN_CATEGORIES, type PassPlan, type PlanCategory } from '../run/dry-run.js';
import { parseScheduledTime, refuseAhead, type Fire } from '../schedule/fire.js';
import { Sink } from './sink.js';
import { printableId } from './status.js';

export interface PlanOptions {
  json: boolean;
  /** Ids shown per category (default 10). */
  limit?: number;
  /** --scheduled-time (RFC 3339); else CRONSAFE_SCHEDULED_TIME; else the latest occurrence. */
  scheduledTime?: string;
  signal?: AbortSignal;
}

/** `cronsafe plan` (also `cronsafe run --dry-run`): what the next run would do (run/dry-run.ts), as text or JSON. */
export async function planCommand(configPath: string, opts: PlanOptions, out: NodeJS.WritableStream = process.stdout): Promise<number> {
  const config = loadConfig(configPath);
  refusePseudoLedger(config);
  // An empty variable is unset (as the shell's ${VAR:-}); an empty flag is a bad value (exit 2).
  const raw = opts.scheduledTime ?? (process.env.CRONSAFE_SCHEDULED_TIME || undefined);
  const from = opts.scheduledTime !== undefined ? '--scheduled-time' : 'CRONSAFE_SCHEDULED_TIME';
  // As the run would: a fire ahead of this clock is refused.
  const scheduledTime = raw !== undefined ? refuseAhead(parseScheduledTime(raw, from), from, new Date()) : undefined;
  const plan = await dryRun(config, { now: Date.now(), scheduledTime, limit: opts.limit ?? 10, signal: opts.signal });
  const report: PlanReport = { ...plan, job: config.name, fire: plan.fire && fireOf(plan.fire.fire, plan.fire.skip) };
  const sink = new Sink(out);
  const takenBack = config.state.postgres !== undefined ? { leaseSeconds: config.lease.seconds } : undefined;
  await sink.write(opts.json ? `${JSON.stringify(jsonOf(report))}\n` : format(report, takenBack));
  await sink.end();
  return 0;
}

interface PlanReport extends PassPlan {
  job: string;
  ledger: 'found' | 'none';
  fire: ReturnType<typeof fireOf> | null;
}

const fireOf = (f: Fire, skip: string | undefined) => ({ occurrence: f.occurrence.toISOString(), local: f.local, source: f.source, skip: skip ?? null });

const LABEL: Record<PlanCategory, string> = {
  new: 'new',
  pending: 'pending',
  refresh: 'due for refresh',
  retryWaiting: 'retry-waiting',
  claimed: 'claimed',
  dead: 'dead',
  done: 'done',
};
const NOTE: Partial<Record<PlanCategory, string>> = {
  retryWaiting: 'backing off: attempted only if the backoff ends while the pass runs',
  claimed: 'attempts running now, or left by a run that died (the next run takes them back)',
  dead: 'left alone: dead-letter retry, or requeue --include-dead',
  done: 'nothing to do',
};

/**
 * `postgres`: a dead run's claims are taken back once their lease has run out (a claim of
 * another owner may be a live sibling's), not at the next run's start, as status says it.
 */
function format(r: PlanReport, postgres?: { leaseSeconds: number }): string {
  const notes: Partial<Record<PlanCategory, string>> = postgres
    ? { ...NOTE, claimed: `attempts running now, or left by a run that died (taken back once their lease, lease.seconds: ${postgres.leaseSeconds}, has run out, by a pod of the pass or the next run)` }
    : NOTE;
  const lines = [`plan for job ${r.job} (dry run: nothing claimed, run or written)`];
  if (r.ledger === 'none') lines.push('no ledger yet: every item is new');
  if (r.fire) lines.push(`fire ${r.fire.occurrence} (${r.fire.source})${r.fire.skip ? `: a run now would skip it (${r.fire.skip}) and process nothing` : ''}`);
  lines.push(`scan ${r.scan}: ${r.scanned} item${r.scanned === 1 ? '' : 's'} found${r.skippedDirectories > 0 ? `, ${r.skippedDirectories} unreadable director${r.skippedDirectories === 1 ? 'y' : 'ies'} skipped` : ''}`);
  lines.push(r.fire?.skip ? 'would attempt 0 (the fire is skipped)' : `would attempt ${r.wouldAttempt} (new + pending + due for refresh)`, '');
  for (const c of PLAN_CATEGORIES) {
    const g = r.groups[c];
    const note = c === 'retryWaiting' && r.nextRetryAt !== null ? `${notes[c]}; next at ${new Date(r.nextRetryAt).toISOString()}` : notes[c];
    lines.push(`${LABEL[c].padEnd(16)} ${String(g.count).padStart(9)}${note && g.count > 0 ? `   (${note})` : ''}`);
    for (const id of g.first) lines.push(`  ${printableId(id)}`);
    if (g.count > g.first.length && g.first.length > 0) lines.push(`  ... and ${g.count - g.first.length} more`);
  }
  if (r.gone > 0) lines.push(`${'gone'.padEnd(16)} ${String(r.gone).padStart(9)}   (pending in the ledger, not found by the scan: the pass forgets them)`);
  return `${lines.join('\n')}\n`;
}

const jsonOf = (r: PlanReport) => ({
  job: r.job,
  ledger: r.ledger,
  fire: r.fire,
  scan: r.scan,
  scanned: r.scanned,
  skippedDirectories: r.skippedDirectories,
  wouldAttempt: r.wouldAttempt,
  ...r.groups,
  nextRetryAt: r.nextRetryAt === null ? null : new Date(r.nextRetryAt).toISOString(),
  gone: r.gone,
});

