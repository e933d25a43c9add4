/**
 * A single-valued option given twice with different values is a usage error (exit 2) naming
 * the option: `cronsafe run -c a.yaml -c b.yaml` ran b.yaml's job, silently, while its author
 * may have meant a.yaml's (commander keeps the last value). Nothing runs; neither job's items
 * move. `--glob` stays repeatable (any of them); a flag without a value given twice is
 * harmless, and so is an option given twice with the same value (it was refused, while
 * `--json --json` was taken: which was meant is not in doubt either way).
 */
import { existsSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';

describe('a single-valued option given twice', () => {
  it('run -c a.yaml -c b.yaml: exit 2 naming -c, neither job runs', async () => {
    const a = workspace({ name: 'job-a', handler: { command: ['cp', '{path}', '{output}'] } }, { 'a.txt': 'a' });
    const b = workspace({ name: 'job-b', handler: { command: ['cp', '{path}', '{output}'] } }, { 'b.txt': 'b' });
    for (const args of [
      ['run', '-c', a.configPath, '-c', b.configPath],
      ['run', '--config', a.configPath, `--config=${b.configPath}`],
    ]) {
      const r = await runCli(args);
      expect(r.code, r.stdout + r.stderr).toBe(2);
      expect(r.stderr).toContain("option '-c, --config <file>'");
      expect(r.stderr).toContain('given more than once');
      expect(r.lines.some((l) => l.msg === 'run started')).toBe(false);
    }
    // Neither run started: no ledger, no output.
    for (const w of [a, b]) {
      expect(existsSync(w.db)).toBe(false);
      expect(existsSync(w.out) ? readdirSync(w.out) : []).toEqual([]);
    }
  });

  it.each([
    [['status', '-c', 'a.yaml', '-c', 'b.yaml'], "'-c, --config <file>'"],
    [['validate', '-c', 'a.yaml', '-c', 'b.yaml'], "'-c, --config <file>'"],
    [['daemon', '-c', 'a.yaml', '-c', 'b.yaml'], "'-c, --config <file>'"],
    [['schedule', '-c', 'a.yaml', '-c', 'b.yaml'], "'-c, --config <file>'"],
    [['plan', '-c', 'a.yaml', '-c', 'b.yaml'], "'-c, --config <file>'"],
    [['requeue', '--all', '-c', 'a.yaml', '-c', 'b.yaml'], "'-c, --config <file>'"],
    [['dead-letter', 'list', '-c', 'a.yaml', '-c', 'b.yaml'], "'-c, --config <file>'"],
    [['dead-letter', 'retry', '--all', '-c', 'a.yaml', '-c', 'b.yaml'], "'-c, --config <file>'"],
    [['run', '--scheduled-time', '2026-01-01T00:00:00Z', '--scheduled-time', '2026-01-02T00:00:00Z'], "'--scheduled-time <rfc3339>'"],
    [['plan', '--scheduled-time', '2026-01-01T00:00:00Z', '--scheduled-time', '2026-01-02T00:00:00Z'], "'--scheduled-time <rfc3339>'"],
    [['plan', '--limit', '5', '--limit', '50'], "'--limit <n>'"],
    [['run', '--dry-run', '--limit', '5', '--limit', '50'], "'--limit <n>'"],
    [['dead-letter', 'list', '--limit', '5', '--limit', '50'], "'--limit <n>'"],
    [['dead-letter', 'list', '--since', '2026-01-01', '--since', '2026-02-01'], "'--since <iso>'"],
    [['requeue', '--done-before', '2026-01-01', '--done-before', '2026-02-01'], "'--done-before <iso>'"],
    [['requeue', '--done-after', '2026-01-01', '--done-after', '2026-02-01'], "'--done-after <iso>'"],
    [['requeue', '--all', '--limit', '5', '--limit', '50'], "'--limit <n>'"],
    [['schedule', '--at', '2026-01-01T00:00:00Z', '--at', '2026-01-02T00:00:00Z'], "'--at <rfc3339>'"],
  ])('%j: exit 2 naming the option', async (args: string[], option: string) => {
    const r = await runCli(args, { env: { CRONSAFE_CONFIG: '/nonexistent/cronsafe.yaml' } });
    expect(r.code, r.stdout + r.stderr).toBe(2);
    expect(r.stderr).toContain(`option ${option}`);
    expect(r.stderr).toContain('given more than once');
    expect(r.stdout).toBe('');
  });

  it('the same value given twice is taken, as --json given twice is', async () => {
    const w = workspace({ handler: { command: ['cp', '{path}', '{output}'] } }, { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' });
    expect((await runCli(['run', '-c', w.configPath])).code).toBe(0);
    const r = await runCli(['requeue', '--all', '--dry-run', '--json', '--limit', '1', '--limit', '1', '-c', w.configPath, '-c', w.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ count: 3, first: ['a.txt'] });
    const list = await runCli(['dead-letter', 'list', '--json', '--since', '2026-01-01', '--since', '2026-01-01T00:00:00Z', '-c', w.configPath]);
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toEqual([]);
  });

  it('--glob stays repeatable and --json given twice is harmless', async () => {
    const w = workspace({ handler: { command: ['cp', '{path}', '{output}'] } }, { 'a.txt': 'a', 'b.csv': 'b', 'c.md': 'c' });
    expect((await runCli(['run', '-c', w.configPath])).code).toBe(0);
    const r = await runCli(['requeue', '--glob', '*.txt', '--glob', '*.csv', '--dry-run', '--json', '--json', '-c', w.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ count: 2 });
  });
});
