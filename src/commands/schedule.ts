import { loadConfig } from '../config/load.js';
import { refusePseudoLedger } from '../config/filesystems.js';
import { ConfigError } from '../errors.js';
import { assertDaemonFires } from './daemon-fires.js';
import { scheduleStatus } from '../schedule/status.js';
import { identifyFire, parseScheduledTime } from '../schedule/fire.js';
import { openStore } from '../ledger/open.js';
import { reading } from '../ledger/reading.js';
import { Sink } from './sink.js';

/**
 * `cronsafe schedule`: latest and next occurrence, due?, stale?, refresh horizon: the
 * debugging tool for "why did (or didn't) it run?". Reads the ledger only if it exists.
 */
export async function scheduleCommand(
  configPath: string,
  opts: { at?: string; json: boolean; daemon: boolean },
  out = process.stdout,
): Promise<number> {
  const config = loadConfig(configPath, { checkPaths: false });
  const schedule = config.schedule;
  if (!schedule) throw new ConfigError(`${config.configPath}: schedule: not configured (add schedule.cron)`, config.configPath, 'schedule');
  // As the daemon refuses it: without this, `-` for latest and next and exit 0.
  if (opts.daemon) assertDaemonFires(config.configPath, schedule.cron);
  const at = opts.at !== undefined ? parseScheduledTime(opts.at, '--at') : new Date();
  let lastRunStartedAt: Date | null = null;
  // A ledger on /proc or /sys: refused as status and plan refuse it (78). The reader found no
  // file there, and the report said the job never ran (`-`), exit 0, as if a run could make one.
  refusePseudoLedger(config);
  const store = openStore(config);
  // Only read, as status does: no migration check, pragma writes or checkpoint at close
  // (~5 ms), and none created when no run made one. A ledger of an older schema (the job
  // still on the cronsafe before an upgrade) is read as it is, never migrated: migrated, the
  // job's older cronsafe refused it as newer than it knows (Store.openRunStarts).
  const ledger = await store.openRunStarts();
  if (ledger) {
    try {
      // A read that fails after the open (a damaged file) names the store, as status does.
      // At an earlier --at, the runs started since had not started yet; without it, one
      // recorded as started after now began under a clock since set back, and the daemon
      // does not count it either (schedule/daemon.ts).
      const last = await reading(store, ledger.lastRunStart(at.getTime()));
      lastRunStartedAt = last ? new Date(last.startedAt) : null;
    } finally {
      await ledger.close();
    }
  }
  const s = scheduleStatus(schedule, at, lastRunStartedAt, opts.daemon ? 'vixie' : 'kubernetes');
  const report = {
    job: config.name,
    cron: schedule.cron,
    timeZone: s.timeZone,
    policy: s.policy,
    at: at.toISOString(),
    latest: s.latest?.toISOString() ?? null,
    latestLocal: s.latestLocal,
    // As a run judges its fire: only a fixed-time schedule's second pass repeats one (a
    // wildcard's is a real interval, which repeatedFire: skip never skips).
    latestIsRepeatedFire: s.latest ? (identifyFire({ ...schedule, timeZone: s.timeZone }, at, s.latest)?.repeatedWallTime ?? false) : false,
    next: s.next?.toISOString() ?? null,
    nextLocal: s.nextLocal,
    lastRunStartedAt: lastRunStartedAt?.toISOString() ?? null,
    due: s.due,
    stale: s.stale,
    graceSeconds: schedule.graceSeconds ?? null,
    refresh: schedule.refresh,
    refreshHorizon: s.refreshHorizon?.toISOString() ?? null,
  };
  const w = Math.max(...Object.keys(report).map((k) => k.length));
  const text = opts.json
    ? `${JSON.stringify(report, null, 2)}\n`
    : Object.entries(report)
        .map(([k, v]) => `${k.padEnd(w)}  ${v === null ? '-' : String(v)}\n`)
        .join('');
  // Through a Sink, as every report: a reader that left (`| head -1`) is a cut output, exit 1
  // with a message, not an unhandled EPIPE.
  const sink = new Sink(out);
  await sink.write(text);
  await sink.end();
  return 0;
}
