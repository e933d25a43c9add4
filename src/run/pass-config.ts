import path from 'node:path';
import type { Config } from '../config/types.js';
import type { PassConfig } from '../ledger/run-lock.js';
import { ownFiles } from '../runner/own-files.js';

/**
 * The config that decides which items a pass sees and what its end of scan forgets, which
 * every pod of a shared pass (PostgreSQL) must run with (docs/postgres.md, "One config per
 * pass"). The scan is source.directory, its include and exclude globs, less the job's own
 * files inside it (output.directory, the ledger, lock.path, the config file, the handler's
 * files: ownFiles); schedule.refresh decides which finished items discovery makes pending
 * again, and with `every-occurrence` the fire it compares with, from schedule.cron and
 * schedule.timeZone. The end of scan forgets every pending item the scan did not see.
 *
 * Not here: what a pod does with an item once claimed (handler, retry, timeouts) is each
 * pod's, and differs harmlessly for the moment a rollout takes; nor retention, which looks
 * only at done items whose files whole scans have not found for days.
 */
export function passConfig(config: Config): PassConfig {
  const source = config.source.directory;
  const refresh = config.schedule?.refresh ?? 'never';
  // As globs are tried, in any order and once each: a reordered list is the same scan.
  const set = (globs: string[]): string[] => [...new Set(globs)].sort();
  const inside = ownFiles(config)
    .map((file) => path.relative(source, file))
    .filter((rel) => rel !== '' && rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
  return {
    'source.directory': source,
    'source.include': set(config.source.include),
    'source.exclude': set(config.source.exclude),
    'schedule.refresh': refresh,
    ...(refresh === 'every-occurrence' ? { 'schedule.cron': config.schedule?.cron ?? null, 'schedule.timeZone': config.schedule?.timeZone ?? null } : {}),
    "the job's own files in source.directory (skipped by the scan)": set(inside),
  };
}
