import type { Command, Option } from 'commander';
import { EXIT } from '../errors.js';

/** Whether `name` names one of `cmd`'s subcommands. */
const subcommand = (cmd: Command, name: string): Command | undefined => cmd.commands.find((c) => c.name() === name || c.aliases().includes(name));

/** `cmd`'s option written `flag` (its long or short form). */
const optionOf = (cmd: Command, flag: string): Option | undefined => cmd.options.find((o) => o.long === flag || o.short === flag);

/**
 * Usage errors commander reports without saying why, checked on the arguments before it
 * parses them (exit 2 from the command concerned, its usage after the error):
 * `cronsafe help bogus` printed the overview and exited 2 (`cronsafe bogus` says "unknown
 * command 'bogus'"); `--json=false` said "unknown option '--json=false'", as if there were no
 * --json: a flag takes no value, and read as given it would have been true.
 */
export function checkUsage(program: Command, args: readonly string[]): void {
  let cmd = program;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--') return;
    if (!arg.startsWith('-')) {
      const sub = subcommand(cmd, arg);
      if (sub !== undefined) {
        cmd = sub;
      } else if (cmd.commands.length > 0) {
        // `help NAME` (commander's own command); any other unknown name commander says itself.
        const name = args[i + 1];
        // `help help`: commander's help command is in no list of commands, so it was unknown too.
        if (arg === 'help' && name === 'help') cmd.help();
        if (arg === 'help' && name !== undefined && !name.startsWith('-') && subcommand(cmd, name) === undefined) {
          cmd.error(`error: unknown command '${name}'`, { exitCode: EXIT.USAGE, code: 'commander.unknownCommand' });
        }
        return;
      }
      continue; // an operand (an item id)
    }
    const eq = arg.startsWith('--') ? arg.indexOf('=') : -1;
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    const option = optionOf(cmd, flag);
    if (option === undefined) {
      // `-cjob.yaml`: a short option with its value attached, as commander reads it after a command.
      const short = /^-[^-]./.test(arg) ? arg.slice(0, 2) : flag;
      if (cmd.commands.length > 0) optionBeforeCommand(cmd, args, i, short);
      continue;
    }
    if (eq > 0 && !option.required && !option.optional) {
      cmd.error(`error: option '${option.long}' takes no value, got '${arg}': give ${option.long} alone, or leave it out`, { exitCode: EXIT.USAGE, code: 'commander.unknownOption' });
    }
    // Its value is the next argument, whatever it looks like (`-c --json=x` names a file).
    if (option.required && eq < 0) i++;
  }
}

/** Every command under `cmd` (commander reads an option only after the command it belongs to). */
const descendants = (cmd: Command): Command[] => cmd.commands.flatMap((c) => [c, ...descendants(c)]);

/** `-h`/`--help` and `-V`/`--version` (commander's defaults): help or the version wherever they are given. */
const HELP_OR_VERSION = new Set(['-h', '--help', '-V', '--version']);

/** An argument as a shell reads it back: quoted when it holds more than plain characters (`-c 'my job.yaml'`). */
const shellWord = (arg: string): string => (/^[\w@%+=:,./-]+$/u.test(arg) ? arg : `'${arg.replaceAll("'", "'\\''")}'`);

/**
 * `cronsafe -c job.yaml status`: commander says "unknown option '-c'" of an option every
 * command has, as if there were none; it is one of the command's, given before the command.
 * Only of the command named: `cronsafe --at X status` said to give `cronsafe status --at X`,
 * which status refuses (commander's unknown option then). A help or version flag among the
 * arguments is left to commander, which prints it, exit 0 (`cronsafe -c job.yaml --version`).
 */
function optionBeforeCommand(group: Command, args: readonly string[], at: number, flag: string): void {
  const has = (c: Command): boolean => optionOf(c, flag) !== undefined;
  const owner = descendants(group).find(has);
  if (owner === undefined) return;
  const ending = args.indexOf('--');
  if (args.slice(0, ending < 0 ? undefined : ending).some((a) => HELP_OR_VERSION.has(a))) return;
  // Its value in the same argument: `--config=FILE`, or `-cFILE` for a short one.
  const attached = args[at]!.startsWith('--') ? args[at]!.includes('=') : args[at]!.length > 2;
  const takesValue = optionOf(owner, flag)!.required && !attached;
  const given = args.slice(at, takesValue ? at + 2 : at + 1);
  const rest = args.slice(at + given.length);
  const named = rest.findIndex((a) => subcommand(group, a) !== undefined);
  // After the command named and its own subcommands (`dead-letter list`).
  let end = named + 1;
  let target = subcommand(group, rest[named] ?? '');
  for (let c = target; c !== undefined && end < rest.length; end++) {
    c = subcommand(c, rest[end]!);
    if (c === undefined) break;
    target = c;
  }
  // A group named without its command (`dead-letter`): the option goes after one of its commands.
  const within = target !== undefined && !has(target) && descendants(target).some(has) ? target : undefined;
  if (target !== undefined && within === undefined && !has(target)) return;
  const path = (c: Command | null): string[] => (c === null ? [] : [...path(c.parent), c.name()]);
  const words = (list: readonly string[]): string[] => list.map(shellWord);
  const message =
    named < 0 || within !== undefined
      ? `error: option '${flag}' goes after a command: ${[...path(within ?? group), '<command>', ...words(given)].join(' ')}`
      : `error: option '${flag}' goes after the command: ${[...path(group), ...words(rest.slice(0, end)), ...words(given), ...words(rest.slice(end))].join(' ')}`;
  group.error(message, { exitCode: EXIT.USAGE, code: 'commander.unknownOption' });
}
