/**
 * argv -> command -> exit code. Each command's module (and what it pulls in: the config
 * schema, pino, SQLite, the runner) is imported only when that command runs, so
 * `cronsafe --version` or `cronsafe validate` does not pay for `cronsafe run`
 * (docs/benchmarks.md, start-up). Signals and process.exit stay in cli.ts.
 */
import { existsSync } from 'node:fs';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { ConfigError, EdgeError, EXIT, coerceError, inConfigFile } from './errors.js';
import { outOfDescriptorsLine } from './descriptors.js';
import { parseLimit, parseSince } from './commands/list-options.js';
import { parseGlob } from './commands/requeue-options.js';
import { asGiven, once } from './commands/option-once.js';
import { checkUsage } from './commands/usage-checks.js';
import { escapeControlsButLayout, escapeInvisible } from './terminal-safe.js';

// What cli.ts calls around the command, from the program's own modules: in the bundle the
// program is one code-cached script (src/code-cache.ts), and a module cli.ts imported
// itself would be one more ES module to load, compile and link at every start.
export { closeHungUpTerminals } from './hung-up-tty.js';
export { settleStdout } from './commands/sink.js';

/**
 * Every run log's lines written (src/log-sink.ts). Its module is loaded only here and by the
 * commands that log: it loads node:net, which `--version` or `validate` need not.
 */
/**
 * Resolves once the program is loaded. Here it is, as soon as this module is; in the bundle,
 * cli.ts's import of this module gets src/code-cache.ts, whose ready() loads the program
 * from its cached script, and whose closeHungUpTerminals (synchronous) works from then.
 */
export async function ready(): Promise<void> {}

export async function logsWritten(): Promise<void> {
  const sink = await import('./log-sink.js');
  await sink.logsWritten();
}

/** What cli.ts gives the program. */
export interface ProgramSignals {
  /** Aborted by the first SIGTERM / SIGINT / SIGHUP / SIGALRM, possibly before the command started. */
  stop: AbortSignal;
  /** Aborted by the second one. */
  force: AbortSignal;
  /** Told the (sub)command's name just before its action runs. */
  commandStarts(name: string): void;
  /** Told by run and daemon, once their config is known, the drain's budget (ms): cli.ts's last resort. */
  drainBudget?: (graceMs: number, marginMs: number) => void;
  /** Told by run when it drains because its run lock or Lease was lost (no signal): cli.ts's last resort from then. */
  safetyLost?: () => void;
  /** Told by requeue and dead-letter retry what to say on stderr if a signal ends them (what stays moved). */
  onEnd?: (note: (signal: string) => string | undefined) => void;
}

interface RequeueFlags {
  config?: string;
  glob?: string[];
  doneBefore?: Date;
  doneAfter?: Date;
  all?: boolean;
  includeDead?: boolean;
  dryRun?: boolean;
  json?: boolean;
  limit?: number;
}

/**
 * `-c ""` (`-c "$CONFIG"` with CONFIG unset) is refused (exit 2), as an empty --at or --glob:
 * read as not given, it took $CRONSAFE_CONFIG or ./cronsafe.yaml, another job's config, and
 * `requeue --all` requeued that job's items. An empty CRONSAFE_CONFIG stays unset, as in the shell.
 */
function parseConfigFile(value: string): string {
  if (value === '') throw new InvalidArgumentError('expected a config file path, got an empty string');
  return value;
}

const configOption = () => new Option('-c, --config <file>', 'config file (default: $CRONSAFE_CONFIG, else ./cronsafe.yaml)').argParser(once(parseConfigFile));

/** The config file of the command that runs (set once its path is known), for main's config errors. */
let commandConfig: string | undefined;

async function configPath(cliPath: string | undefined): Promise<string> {
  const { resolveConfigPath } = await import('./config/load.js');
  commandConfig = resolveConfigPath(cliPath);
  return commandConfig;
}

// package.json's version, put in by the bundler (scripts/bundle.mjs), so the bin always
// says what it is, wherever it runs (never the version of the project that ran it through
// npx, as npm_package_version would). tsc's per-file output (benchmarks) has none.
declare const CRONSAFE_VERSION: string | undefined;
const VERSION = typeof CRONSAFE_VERSION === 'string' ? CRONSAFE_VERSION : '0.0.0-unbundled';

export function buildProgram(signals: ProgramSignals, setExit: (code: number) => void): Command {
  const { stop, force } = signals;
  const program = new Command('cronsafe')
    .description('Drain a backlog of work items safely from a Kubernetes CronJob')
    .version(VERSION)
    .exitOverride()
    // A usage error quotes the argument it refuses: its controls (ESC, C1) are shown as the
    // other stderr lines show them, never sent to the terminal. Set before the commands,
    // which copy it.
    .configureOutput({ writeErr: (text) => process.stderr.write(escapeControlsButLayout(text)) })
    .showHelpAfterError()
    .hook('preAction', (_program, action) => signals.commandStarts(action.name()));

  const run = program
    .command('run')
    .description('one pass over the backlog (the CronJob command)')
    .addOption(configOption())
    .option('--scheduled-time <rfc3339>', "the occurrence this run is for (the Job's cronjob-scheduled-timestamp); default $CRONSAFE_SCHEDULED_TIME, else the latest occurrence", once(asGiven))
    .option('--dry-run', 'say what the pass would do and do nothing (= cronsafe plan)')
    .option('--json', 'with --dry-run: machine-readable output')
    .option('--limit <n>', 'with --dry-run: ids shown per category (default 10)', once(parseLimit))
    .action(async (o: { config?: string; scheduledTime?: string; dryRun?: boolean; json?: boolean; limit?: number }) => {
      if (o.dryRun) {
        // Nothing to drain: a signal ends it at once, and stdout is flushed like any report's.
        signals.commandStarts('plan');
        const { planCommand } = await import('./commands/plan.js');
        setExit(await planCommand(await configPath(o.config), { json: !!o.json, limit: o.limit, scheduledTime: o.scheduledTime }));
        return;
      }
      if (o.json || o.limit !== undefined) run.error(`error: run: ${o.json ? '--json' : '--limit'} only applies with --dry-run`, { exitCode: EXIT.USAGE });
      const { runCommand } = await import('./commands/run.js');
      setExit(await runCommand({ configPath: await configPath(o.config), scheduledTime: o.scheduledTime, stop, force, drainBudget: signals.drainBudget, safetyLost: signals.safetyLost }));
    });

  program
    .command('status')
    .description('item counts by state, recent runs, dead letters')
    .addOption(configOption())
    .option('--json', 'machine-readable output')
    .action(async (o: { config?: string; json?: boolean }) => {
      const { statusCommand } = await import('./commands/status.js');
      setExit(await statusCommand(await configPath(o.config), { json: !!o.json }));
    });

  const dl = program.command('dead-letter').description('inspect or requeue dead-lettered items');
  dl.command('list')
    .description('dead items, oldest first (--json: one JSON array, one element per line)')
    .addOption(configOption())
    .option('--json', 'machine-readable output')
    .option('--limit <n>', 'at most n items', once(parseLimit))
    .option('--since <iso>', 'only items dead-lettered at or after this date or timestamp', once(parseSince))
    .action(async (o: { config?: string; json?: boolean; limit?: number; since?: Date }) => {
      const { deadLetterList } = await import('./commands/dead-letter.js');
      setExit(await deadLetterList(await configPath(o.config), { json: !!o.json, limit: o.limit, since: o.since }));
    });
  const retry = dl
    .command('retry')
    .description('requeue dead items (the given ids, or --all): pending again with their attempts reset')
    .argument('[ids...]', 'item ids to requeue')
    .option('--all', 'requeue every dead item')
    .addOption(configOption())
    .action(async (ids: string[], o: { config?: string; all?: boolean }) => {
      if (!o.all && ids.length === 0) retry.error('error: dead-letter retry: no item ids given (give one or more ids, or --all)', { exitCode: EXIT.USAGE });
      // Both would be read as --all: requeuing everything is not what someone naming ids meant.
      if (o.all && ids.length > 0) retry.error('error: dead-letter retry: give item ids or --all, not both', { exitCode: EXIT.USAGE });
      const { deadLetterRetry } = await import('./commands/dead-letter.js');
      const { MovedSoFar } = await import('./commands/moved-so-far.js');
      const progress = new MovedSoFar('dead item');
      signals.onEnd?.((sig) => progress.note(sig));
      setExit(await deadLetterRetry(await configPath(o.config), ids, { all: !!o.all }, process.stdout, progress));
    });

  program
    .command('plan')
    .description('what the next run would do: new, pending, due for refresh, retry-waiting, dead (claims, runs and writes nothing)')
    .addOption(configOption())
    .option('--json', 'machine-readable output')
    .option('--limit <n>', 'ids shown per category (default 10)', once(parseLimit))
    .option('--scheduled-time <rfc3339>', 'plan for this occurrence (default $CRONSAFE_SCHEDULED_TIME, else the latest)', once(asGiven))
    .action(async (o: { config?: string; json?: boolean; limit?: number; scheduledTime?: string }) => {
      const { planCommand } = await import('./commands/plan.js');
      setExit(await planCommand(await configPath(o.config), { json: !!o.json, limit: o.limit, scheduledTime: o.scheduledTime }));
    });

  const requeue = program
    .command('requeue')
    .description('put done (or dead) items back to pending, to be processed again by the next run')
    .argument('[ids...]', 'item ids to requeue')
    .option('--glob <glob>', 'items whose id matches this glob (repeatable: any of them)', parseGlob)
    .option('--done-before <iso>', 'items finished before this date or timestamp', once(parseSince))
    .option('--done-after <iso>', 'items finished at or after this date or timestamp', once(parseSince))
    .option('--all', 'every done item (with --include-dead, every dead one too)')
    .option('--include-dead', 'dead items too (their time is when they were dead-lettered)')
    .option('--dry-run', 'count what would be requeued and change nothing')
    .option('--json', 'machine-readable output')
    .option('--limit <n>', 'show at most n of the ids (default 10)', once(parseLimit))
    .addOption(configOption())
    .action(async (ids: string[], o: RequeueFlags) => {
      const { requeueCommand, badGlob } = await import('./commands/requeue.js');
      const { MovedSoFar } = await import('./commands/moved-so-far.js');
      // As commander says it for the other option values (parseGlob leaves this check here).
      const bad = o.glob && badGlob(o.glob);
      if (bad) requeue.error(`error: option '--glob <glob>' argument '${bad.glob}' is invalid. not a valid glob: ${bad.reason}`, { exitCode: EXIT.USAGE, code: 'commander.invalidArgument' });
      const usage = (msg: string) => requeue.error(`error: requeue: ${msg}`, { exitCode: EXIT.USAGE });
      const filters = [o.glob && '--glob', o.doneBefore && '--done-before', o.doneAfter && '--done-after'].filter(Boolean);
      if (ids.length === 0 && !o.all && filters.length === 0) usage('nothing selected (give item ids, --glob, --done-before / --done-after, or --all)');
      // Requeuing everything is not what someone naming ids or a filter meant.
      if (ids.length > 0 && (o.all || filters.length > 0)) usage(`give item ids or a selection (${o.all ? '--all' : filters.join(', ')}), not both`);
      if (o.all && filters.length > 0) usage(`--all selects every item: drop it, or drop ${filters.join(', ')}`);
      if (o.doneAfter && o.doneBefore && o.doneAfter.getTime() >= o.doneBefore.getTime()) {
        usage(`--done-after ${o.doneAfter.toISOString()} is not before --done-before ${o.doneBefore.toISOString()}: nothing could match`);
      }
      const progress = new MovedSoFar('item');
      if (!o.dryRun) signals.onEnd?.((sig) => progress.note(sig));
      setExit(
        await requeueCommand(
          await configPath(o.config),
          { ids: ids.length > 0 ? ids : undefined, globs: o.glob, doneAfter: o.doneAfter, doneBefore: o.doneBefore, includeDead: !!o.includeDead },
          { dryRun: !!o.dryRun, json: !!o.json, show: o.limit, progress: o.dryRun ? undefined : progress },
        ),
      );
    });

  program
    .command('schedule')
    .description('latest and next occurrence, due?, stale?, refresh horizon')
    .addOption(configOption())
    .option('--at <rfc3339>', 'evaluate at this instant instead of now', once(asGiven))
    .option('--json', 'machine-readable output')
    .option('--daemon', "use cronsafe daemon's DST policy (Vixie) instead of Kubernetes'")
    .action(async (o: { config?: string; at?: string; json?: boolean; daemon?: boolean }) => {
      const { scheduleCommand } = await import('./commands/schedule.js');
      setExit(await scheduleCommand(await configPath(o.config), { at: o.at, json: !!o.json, daemon: !!o.daemon }));
    });

  program
    .command('daemon')
    .description('stay up and run each occurrence of schedule.cron (off-Kubernetes use)')
    .addOption(configOption())
    .action(async (o: { config?: string }) => {
      const { daemonCommand } = await import('./commands/daemon.js');
      setExit(await daemonCommand({ configPath: await configPath(o.config), stop, force, drainBudget: signals.drainBudget }));
    });

  program
    .command('validate')
    .description('check a config and exit')
    .addOption(configOption())
    .action(async (o: { config?: string }) => {
      const { loadConfig, configSummary } = await import('./config/load.js');
      const { checkFilesystems } = await import('./config/filesystems.js');
      const file = await configPath(o.config);
      const config = loadConfig(file);
      // The file systems found, so that the network check can be seen working.
      const filesystems = checkFilesystems(config).map(({ key, path, type, network, allowed }) => ({ key, path, type, network, ...(network ? { allowed } : {}) }));
      const where = filesystems.map((f) => `${f.key} on ${f.type}${f.network ? ' (network, allowed)' : ''}`).join(', ');
      // A SQLite ledger another job owns: refused here as run and status refuse it (78).
      // Not PostgreSQL: validate makes no connection.
      const sqlite = config.state.sqlite;
      if (sqlite !== undefined && sqlite !== ':memory:') {
        const { openStore } = await import('./ledger/open.js');
        const store = openStore(config);
        if (existsSync(sqlite)) {
          // Only that: an older schema (run migrates it) or an unreadable file is run's to report.
          await store
            .openLedger({ readOnly: true })
            .then((l) => l.close())
            .catch((err: unknown) => {
              if (err instanceof ConfigError) throw err;
            });
        }
        // The start journal beside it (planted before the first run, too): 78, as run says.
        await store.assertOwnFiles();
      }
      if (config.handler.module) {
        // Only then: a command handler's config loads no handler code (start-up time).
        const { checkModuleHandler } = await import('./run/load-handler.js');
        await checkModuleHandler(config);
      }
      const { moduleEnvUnused } = await import('./config/messages.js');
      const envUnused = moduleEnvUnused(config.handler);
      if (envUnused) process.stderr.write(escapeControlsButLayout(`${file}: warning: ${envUnused}\n`));
      const summary = { ...configSummary(config), filesystems };
      // A path's or value's controls as JSON escapes (JSON.stringify leaves DEL and C1 raw), as a config error shows them.
      process.stdout.write(escapeControlsButLayout(`${file}: OK${where ? ` (${where})` : ''}\n${JSON.stringify(summary, null, 2)}\n`));
      setExit(EXIT.OK);
    });
  return program;
}

/** Parse argv, run the command, map what it throws to an exit code (DESIGN.md). */
export async function main(argv: string[], signals: ProgramSignals): Promise<number> {
  let code: number = EXIT.OK;
  commandConfig = undefined;
  const program = buildProgram(signals, (c) => (code = c));
  try {
    checkUsage(program, argv.slice(2));
    await program.parseAsync(argv);
    return code;
  } catch (raw) {
    if (raw instanceof CommanderError) {
      // --help and --version end here too, with exit code 0.
      return raw.exitCode === 0 ? 0 : EXIT.USAGE;
    }
    const err = coerceError(raw);
    if (err instanceof ConfigError) {
      // Every config error names its file: one raised below the loader (the ledger) knows only its key.
      const named = commandConfig === undefined ? err : inConfigFile(commandConfig, err);
      // Characters a terminal does not show too (a zero-width space pasted into a key, a second
      // BOM): unescaped, `concurrency<U+200B>: unknown key (did you mean "concurrency"?)`.
      process.stderr.write(`cronsafe: config error: ${escapeControlsButLayout(escapeInvisible(named.message))}\n`);
      return EXIT.CONFIG;
    }
    // No file descriptor left (a low `ulimit -n`): the environment's, not a bug; one line
    // that says so first, with the limit, whatever ran out of them (a start journal's open).
    const fds = outOfDescriptorsLine(err);
    if (fds !== undefined) {
      process.stderr.write(`cronsafe: ${escapeControlsButLayout(fds)}\n`);
      return EXIT.FATAL;
    }
    // Its message says it all (an unusable environment, a bad flag value): one line, no stack.
    if (err instanceof EdgeError) {
      process.stderr.write(`cronsafe: ${escapeControlsButLayout(err.message)}\n`);
      return err.exitCode;
    }
    process.stderr.write(`cronsafe: fatal: ${escapeControlsButLayout(err.stack ?? err.message)}\n`);
    return EXIT.FATAL;
  }
}
