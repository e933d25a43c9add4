/**
 * `--limit` past what JavaScript counts exactly (`99999999999999999999`, `1e400`): every
 * command that takes it said "expected a positive integer", of a positive integer. Each now
 * exits 2 (a bad command line, DESIGN.md) with the option, the value and the range allowed,
 * before the config or the ledger is read; the greatest value allowed still works.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, runCli, workspace } from '../helpers/cli.js';

const MAX = String(Number.MAX_SAFE_INTEGER);
const COMMANDS = [
  ['plan'],
  ['run', '--dry-run'],
  ['dead-letter', 'list'],
  ['requeue', '--all', '--dry-run'],
];

describe('--limit out of range', () => {
  it.each(COMMANDS.flatMap((cmd) => ['99999999999999999999', '9007199254740992', '1'.repeat(400)].map((v) => [cmd, v] as const)))(
    '%j --limit %s: exit 2 naming the option, the value and the range',
    async (cmd, value) => {
      const r = await runCli([...cmd, '--limit', value], { env: { CRONSAFE_CONFIG: '/nonexistent/cronsafe.yaml' } });
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain(`error: option '--limit <n>' argument '${value}' is invalid. out of range: the allowed range is 1 to ${MAX}\n`);
      expect(r.stdout).toBe('');
    },
  );

  it.each([['1e400'], ['-5'], ['0x10'], ['2.5']])('--limit %s (not digits) says the range too', async (value) => {
    const r = await runCli(['dead-letter', 'list', '--limit', value], { env: { CRONSAFE_CONFIG: '/nonexistent/cronsafe.yaml' } });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain(`argument '${value}' is invalid. expected a whole number from 1 to ${MAX}`);
  });

  it('the greatest value allowed works', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') } }, { 'a.txt': 'a', 'b.txt': 'b' });
    const plan = await runCli(['plan', '-c', ws.configPath, '--json', '--limit', MAX]);
    expect(plan.code, plan.stderr).toBe(0);
    expect((JSON.parse(plan.stdout) as { new: { first: string[] } }).new.first.sort()).toEqual(['a.txt', 'b.txt']);
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    const list = await runCli(['dead-letter', 'list', '-c', ws.configPath, '--json', '--limit', MAX]);
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toEqual([]);
    const requeue = await runCli(['requeue', '--all', '--dry-run', '--json', '--limit', MAX, '-c', ws.configPath]);
    expect(requeue.code, requeue.stderr).toBe(0);
    expect(JSON.parse(requeue.stdout)).toMatchObject({ count: 2, first: ['a.txt', 'b.txt'] });
  });
});
