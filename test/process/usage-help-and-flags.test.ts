/**
 * Usage errors commander gave without a reason. `cronsafe help bogus` printed the overview
 * on stderr and exited 2, never saying why (`cronsafe bogus` says "unknown command");
 * `status --json=false` said "unknown option '--json=false'", as if there were no --json.
 * `cronsafe -c job.yaml status` said "unknown option '-c'" of an option every command has.
 * All stay exit 2, now saying what is wrong; `help run` and `--json` work as before.
 */
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';

describe('usage errors say what is wrong', () => {
  it.each([
    [['help', 'bogus'], "error: unknown command 'bogus'"],
    [['dead-letter', 'help', 'bogus'], "error: unknown command 'bogus'"],
    [['status', '--json=false'], "error: option '--json' takes no value, got '--json=false': give --json alone, or leave it out"],
    [['run', '--dry-run=true', '-c', 'x.yaml'], "error: option '--dry-run' takes no value, got '--dry-run=true': give --dry-run alone, or leave it out"],
    [['requeue', 'a.txt', '--json=true'], "error: option '--json' takes no value, got '--json=true': give --json alone, or leave it out"],
    [['dead-letter', 'list', '--json=0'], "error: option '--json' takes no value, got '--json=0': give --json alone, or leave it out"],
    // A command's option before the command: commander said "unknown option '-c'", as if there were none.
    [['-c', 'job.yaml', 'status', '--json'], "error: option '-c' goes after the command: cronsafe status -c job.yaml --json"],
    [['--config=job.yaml', 'dead-letter', 'list'], "error: option '--config' goes after the command: cronsafe dead-letter list --config=job.yaml"],
    [['dead-letter', '-c', 'job.yaml', 'retry', 'a.scc'], "error: option '-c' goes after the command: cronsafe dead-letter retry -c job.yaml a.scc"],
    [['--json', 'bogus'], "error: option '--json' goes after a command: cronsafe <command> --json"],
    // Its value attached (`-cjob.yaml`, as commander reads it after the command): "unknown option '-cjob.yaml'".
    [['-cjob.yaml', 'status'], "error: option '-c' goes after the command: cronsafe status -cjob.yaml"],
  ])('%j: exit 2 saying so, with the usage after it', async (args, said) => {
    const r = await runCli(args);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr.startsWith(`${said}\n`), r.stderr).toBe(true);
    expect(r.stderr).toContain('Usage: cronsafe');
  });

  it.each([
    // An option of another command: "goes after the command: cronsafe status --at X" named a
    // line status refuses in its turn.
    [['--at', '2026-01-01T00:00:00Z', 'status'], "error: unknown option '--at'"],
    [['--all', 'dead-letter', 'list'], "error: unknown option '--all'"],
    [['-c', 'job.yaml', 'dead-letter'], "error: option '-c' goes after a command: cronsafe dead-letter <command> -c job.yaml"],
    // The line shown reads back as typed: `-c my job.yaml` was two arguments.
    [['-c', 'my job.yaml', 'status'], "error: option '-c' goes after the command: cronsafe status -c 'my job.yaml'"],
  ])('%j: the line shown is one that works', async (args, said) => {
    const r = await runCli(args);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr.startsWith(`${said}\n`), r.stderr).toBe(true);
  });

  it.each([
    [['-c', 'job.yaml', '--version'], /^\d+\.\d+\.\d+/],
    [['-V', '-c', 'job.yaml'], /^\d+\.\d+\.\d+/],
    [['-c', 'job.yaml', '--help'], /^Usage: cronsafe \[options\] \[command\]/],
    [['-c', 'job.yaml', 'status', '-h'], /^Usage: cronsafe \[options\] \[command\]/],
  ])('%j: help and the version are printed wherever they are given, as before (exit 0)', async (args, printed) => {
    const r = await runCli(args);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(printed);
  });

  it('help run and a value-taking option given as --option=value work as before', async () => {
    const help = await runCli(['help', 'run']);
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toContain('Usage: cronsafe run [options]');
    // The help command is listed: `help help` is the overview, not an unknown command.
    const helpHelp = await runCli(['help', 'help']);
    expect(helpHelp.code, helpHelp.stderr).toBe(0);
    expect(helpHelp.stdout).toContain('Usage: cronsafe [options] [command]');
    // A value that looks like a flag is the option's value, not a flag.
    const r = await runCli(['validate', '--config=/nonexistent/--json=false']);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toContain('config file not found: /nonexistent/--json=false');
    const named = await runCli(['status', '-c', '/nonexistent/x', '--json']);
    expect(named.code, named.stderr).toBe(78);
    const dash = await runCli(['validate', '-c', '--json=false']);
    expect(dash.code, dash.stderr).toBe(78);
    expect(dash.stderr).toMatch(/config file not found: .*\/--json=false\n/);
  });
});
