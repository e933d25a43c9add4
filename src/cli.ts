#!/usr/bin/env -S node --optimize-for-size
import { Command, CommanderError, Option } from 'commander';
import { resolveConfigPath, loadConfig, configSummary } from './config/load.js';
import { ConfigError, EXIT, coerceError } from './errors.js';
import { deadLetterList, deadLetterRetry } from './commands/dead-letter.js';
import { runCommand, StateUnavailable } from './commands/run.js';
import { statusCommand } from './commands/status.js';
import { scheduleCommand } from './commands/schedule.js';
import { daemonCommand } from './commands/daemon.js';
import { ScheduledTimeError } from './schedule/fire.js';

// The shebang's --optimize-for-size makes V8 collect garbage before growing the heap: a
// run over 1,000,000 items then stays within ~1.2x the RSS of a 1,000-item run (without it,
// ~2x: V8 lets garbage pile up to its default old-generation limit). docs/benchmarks.md.

/**
 * The only place that installs signal handlers or calls process.exit. First SIGTERM/SIGINT
 * drains, a second aborts at once. With handlers installed, Node as PID 1 (no init) still
 * reacts to SIGTERM: the kernel's "PID 1 ignores default-action signals" rule only
 * applies to signals without a handler.
 */
function installSignals(): { stop: AbortSignal; force: AbortSignal } {
  const stop = new AbortController();
  const force = new AbortController();
  const onSignal = (sig: NodeJS.Signals) => {
    if (!stop.signal.aborted) stop.abort(sig);
    else if (!force.signal.aborted) force.abort(`second ${sig}`);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  return { stop: stop.signal, force: force.signal };
}

const configOption = () => new Option('-c, --config <file>', 'config file (default: $CRONSAFE_CONFIG, else ./cronsafe.yaml)');

function buildProgram(setExit: (code: number) => void): Command {
  const program = new Command('cronsafe')
    .description('Drain a backlog of work items safely from a Kubernetes CronJob')
    .version(process.env.npm_package_version ?? '0.1.0')
    .exitOverride()
    .showHelpAfterError();

  program
    .command('run')
    .description('one pass over the backlog (the CronJob command)')
    .addOption(configOption())
    .option('--scheduled-time <rfc3339>', "the occurrence this run is for (the Job's cronjob-scheduled-timestamp); default $CRONSAFE_SCHEDULED_TIME, else the latest occurrence")
    .action(async (o: { config?: string; scheduledTime?: string }) => {
      const signals = installSignals();
      setExit(await runCommand({ configPath: resolveConfigPath(o.config), scheduledTime: o.scheduledTime, ...signals }));
    });

  program
    .command('status')
    .description('item counts by state, recent runs, dead letters')
    .addOption(configOption())
    .option('--json', 'machine-readable output')
    .action(async (o: { config?: string; json?: boolean }) => {
      setExit(await statusCommand(resolveConfigPath(o.config), { json: !!o.json }));
    });

  const dl = program.command('dead-letter').description('inspect or requeue dead-lettered items');
  dl.command('list')
    .addOption(configOption())
    .option('--json', 'machine-readable output')
    .action(async (o: { config?: string; json?: boolean }) => {
      setExit(await deadLetterList(resolveConfigPath(o.config), { json: !!o.json }));
    });
  dl.command('retry')
    .argument('[ids...]', 'item ids to requeue')
    .option('--all', 'requeue every dead item')
    .addOption(configOption())
    .action(async (ids: string[], o: { config?: string; all?: boolean }) => {
      if (!o.all && ids.length === 0) throw new CommanderError(EXIT.USAGE, 'cronsafe.usage', 'dead-letter retry: give item ids or --all');
      setExit(await deadLetterRetry(resolveConfigPath(o.config), ids, { all: !!o.all }));
    });

  program
    .command('schedule')
    .description('latest and next occurrence, due?, stale?, refresh horizon')
    .addOption(configOption())
    .option('--at <rfc3339>', 'evaluate at this instant instead of now')
    .option('--json', 'machine-readable output')
    .option('--daemon', "use cronsafe daemon's DST policy (Vixie) instead of Kubernetes'")
    .action(async (o: { config?: string; at?: string; json?: boolean; daemon?: boolean }) => {
      setExit(await scheduleCommand(resolveConfigPath(o.config), { at: o.at, json: !!o.json, daemon: !!o.daemon }));
    });

  program
    .command('daemon')
    .description('stay up and run each occurrence of schedule.cron (off-Kubernetes use)')
    .addOption(configOption())
    .action(async (o: { config?: string }) => {
      const signals = installSignals();
      setExit(await daemonCommand({ configPath: resolveConfigPath(o.config), ...signals }));
    });

  program
    .command('validate')
    .description('check a config and exit')
    .addOption(configOption())
    .action((o: { config?: string }) => {
      const file = resolveConfigPath(o.config);
      const config = loadConfig(file);
      process.stdout.write(`${file}: OK\n${JSON.stringify(configSummary(config), null, 2)}\n`);
      setExit(EXIT.OK);
    });
  return program;
}

async function main(argv: string[]): Promise<number> {
  let code: number = EXIT.OK;
  const program = buildProgram((c) => (code = c));
  try {
    await program.parseAsync(argv);
    return code;
  } catch (raw) {
    if (raw instanceof CommanderError) {
      // --help and --version end here too, with exit code 0.
      return raw.exitCode === 0 ? 0 : EXIT.USAGE;
    }
    const err = coerceError(raw);
    if (err instanceof ConfigError) {
      process.stderr.write(`cronsafe: config error: ${err.message}\n`);
      return EXIT.CONFIG;
    }
    if (err instanceof ScheduledTimeError) {
      process.stderr.write(`cronsafe: ${err.message}\n`);
      return EXIT.USAGE;
    }
    if (err instanceof StateUnavailable) {
      process.stderr.write(`cronsafe: ${err.message}\n`);
      return EXIT.FATAL;
    }
    process.stderr.write(`cronsafe: fatal: ${err.stack ?? err.message}\n`);
    return EXIT.FATAL;
  }
}

main(process.argv).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`cronsafe: fatal: ${String(err)}\n`);
    process.exit(EXIT.FATAL);
  },
);
