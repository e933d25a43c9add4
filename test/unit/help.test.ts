/** `cronsafe <command> --help` says what each command does, down to the subcommands. */
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/program.js';

const never = new AbortController().signal;

function commands(c: Command, prefix = ''): [string, Command][] {
  return c.commands.flatMap((sub) => {
    const name = `${prefix}${sub.name()}`;
    return [[name, sub] as [string, Command], ...commands(sub, `${name} `)];
  });
}

describe('--help', () => {
  const program = buildProgram({ stop: never, force: never, commandStarts: () => {} }, () => {});
  it.each(commands(program))('%s has a description', (_name, cmd) => {
    expect(cmd.description().trim()).not.toBe('');
  });
});
