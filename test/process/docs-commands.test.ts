/**
 * Every `cronsafe <command> --option` a user copies from README.md, docs/*.md and the chart's
 * README and NOTES (code blocks and inline code alike) is an option that command takes, as its
 * own `--help` lists it: a renamed or removed flag left in the docs is a user's first try
 * failing with exit 2, "unknown option". docs-configs.test.ts does the same for configs.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, runCli } from '../helpers/cli.js';

const COMMANDS = ['dead-letter list', 'dead-letter retry', 'run', 'status', 'requeue', 'plan', 'validate', 'schedule', 'daemon'];
const FILES = [
  'README.md',
  'helm/cronsafe/README.md',
  'helm/cronsafe/templates/NOTES.txt',
  ...readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** `command -> {flag -> where}` for each mention of a command with options after it. */
function mentions(): Map<string, Map<string, string>> {
  const found = new Map<string, Map<string, string>>();
  // The command after `cronsafe` (not `qc-cronsafe`, a release's name), then what follows it on
  // the line up to a comment, a pipe, a closing backquote or the next command.
  const use = new RegExp(`(?<![\\w/.-])cronsafe (${COMMANDS.join('|')})\\b([^\`#|;&\\n]*)`, 'g');
  for (const file of FILES) {
    readFileSync(path.join(ROOT, file), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        for (const m of line.matchAll(use)) {
          const [, command, rest] = m as unknown as [string, string, string];
          // Stop at the next `cronsafe ...` of the same line (README's "(also: cronsafe run --dry-run)").
          const own = rest.split(/(?<![\w/.-])cronsafe /)[0]!;
          for (const flag of own.match(/(?<![\w-])--[a-z][a-z-]*/g) ?? []) {
            const flags = found.get(command) ?? new Map<string, string>();
            if (!flags.has(flag)) flags.set(flag, `${file}:${i + 1}`);
            found.set(command, flags);
          }
        }
      });
  }
  return found;
}

describe('the command lines in the docs', () => {
  const all = mentions();

  it('are found (the scan reads the docs at all)', () => {
    expect(all.get('requeue')?.has('--done-after')).toBe(true);
    expect(all.get('dead-letter list')?.has('--since')).toBe(true);
    expect(all.get('schedule')?.has('--at')).toBe(true);
  });

  it.each([...all].map(([command, flags]) => [command, [...flags]] as const))('cronsafe %s: every option the docs give is in its --help', async (command, flags) => {
    const r = await runCli([...command.split(' '), '--help']);
    expect(r.code, r.stderr).toBe(0);
    const unknown = flags.filter(([flag]) => !new RegExp(`(?<![\\w-])${flag}(?![\\w-])`).test(r.stdout)).map(([flag, where]) => `${where}: ${flag}`);
    expect(unknown).toEqual([]);
  });
});
