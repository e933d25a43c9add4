/**
 * `dead-letter list` prints an id with a space, quote or control character JSON-quoted, so
 * that it stays on its line and can be pasted back into `dead-letter retry`. Before, the
 * pasted form was taken literally: "1 of the given ids were not dead letters", exit 1.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { FIXTURES, runCli, statusJson, workspace } from '../helpers/cli.js';

describe('dead-letter retry of an id as dead-letter list printed it', () => {
  it.each(['new\nline corrupt.scc', 'tab\tand "quotes" corrupt.scc'])('%j: listed quoted, requeued from the pasted text', async (name) => {
    const ws = workspace(
      { handler: { module: path.join(FIXTURES, 'process/fail-some-module.mjs') }, retry: { maxAttempts: 1 } },
      { [name]: 'x', 'plain.scc': 'ok' },
    );
    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);
    const list = await runCli(['dead-letter', 'list', '-c', ws.configPath]);
    const printed = list.stdout.split('\n')[0]!.split('\t')[0]!;
    expect(printed).toBe(JSON.stringify(name));
    const retry = await runCli(['dead-letter', 'retry', '-c', ws.configPath, printed]);
    expect(retry.code, retry.stdout + retry.stderr).toBe(0);
    expect(retry.stdout).toBe('requeued 1 dead item\n');
    expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 1, dead: 0, done: 1 });
  }, 60_000);

  it('an id that really starts and ends with a double quote, given as it is (from list --json), is that id, not the one inside the quotes', async () => {
    const quoted = '"corrupt.scc"';
    const ws = workspace(
      { handler: { module: path.join(FIXTURES, 'process/fail-some-module.mjs') }, retry: { maxAttempts: 1 } },
      { [quoted]: 'x', 'corrupt.scc': 'x' },
    );
    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);
    const list = await runCli(['dead-letter', 'list', '--json', '-c', ws.configPath]);
    const ids = (JSON.parse(list.stdout) as { id: string }[]).map((d) => d.id);
    expect(ids.sort()).toEqual([quoted, 'corrupt.scc'].sort());
    const retry = await runCli(['dead-letter', 'retry', '-c', ws.configPath, quoted]);
    expect(retry.code, retry.stdout + retry.stderr).toBe(0);
    const ledger = await openSqliteLedger(ws.db);
    try {
      expect((await ledger.get(quoted))?.state).toBe('pending');
      expect((await ledger.get('corrupt.scc'))?.state).toBe('dead');
    } finally {
      await ledger.close();
    }
  }, 60_000);
});

describe('a last error with terminal control characters in the text listings', () => {
  it('status and dead-letter list show them escaped, never raw (a colored or title-setting handler cannot drive the terminal); --json keeps them exactly', async () => {
    // What colored tools print, plus a window-title escape, backspaces and a NUL.
    const stderr = '\\033[1;31mFAILED\\033[0m \\033]0;pwned\\007 ok\\010\\010XX \\000end';
    const ws = workspace({ handler: { command: ['sh', '-c', `printf '${stderr}' >&2; exit 3`] }, retry: { maxAttempts: 1 } }, { 'bad.txt': 'x' });
    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);
    const raw = '\u001b[1;31mFAILED\u001b[0m \u001b]0;pwned\u0007 ok\b\bXX \u0000end';
    const json = await runCli(['dead-letter', 'list', '--json', '-c', ws.configPath]);
    expect((JSON.parse(json.stdout) as { lastError: string }[])[0]!.lastError).toBe(`exit code 3: ${raw}`);
    const shown = 'exit code 3: \\u001b[1;31mFAILED\\u001b[0m \\u001b]0;pwned\\u0007 ok\\u0008\\u0008XX \\u0000end';
    const list = await runCli(['dead-letter', 'list', '-c', ws.configPath]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toBe(`bad.txt\tattempts 1\t${shown}\n`);
    const status = await runCli(['status', '-c', ws.configPath]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain(`  bad.txt  attempts 1  ${shown}\n`);
    for (const out of [list.stdout, status.stdout]) expect(out).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
  }, 60_000);
});
