/**
 * `dead-letter list` prints an id with a space, quote or control character JSON-quoted, so
 * that it stays on its line and can be pasted back into `dead-letter retry`. Before, the
 * pasted form was taken literally: "1 of the given ids were not dead letters", exit 1.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { FIXTURES, runCli, statusJson, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';

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

describe('dead-letter retry of a quoted id with a space, as list --json gives it', () => {
  const quoted = '"sp ace corrupt.scc"';
  const inside = 'sp ace corrupt.scc';
  const states = async (db: string): Promise<Array<string | undefined>> => {
    const ledger = await openSqliteLedger(db);
    try {
      return [(await ledger.get(quoted))?.state, (await ledger.get(inside))?.state];
    } finally {
      await ledger.close();
    }
  };

  it('alone in the ledger, it is that item (not the one a listing prints so, which is not there)', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/fail-some-module.mjs') }, retry: { maxAttempts: 1 } }, { [quoted]: 'x' });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    const ids = (JSON.parse((await runCli(['dead-letter', 'list', '--json', '-c', ws.configPath])).stdout) as { id: string }[]).map((d) => d.id);
    expect(ids).toEqual([quoted]);
    const retry = await runCli(['dead-letter', 'retry', '-c', ws.configPath, quoted]);
    expect(retry.code, retry.stdout + retry.stderr).toBe(0);
    expect(await states(ws.db)).toEqual(['pending', undefined]);
  }, 60_000);

  it('beside the item a listing prints as it, neither is requeued, exit 1, with how to name each (before: the other one was requeued, exit 0)', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/fail-some-module.mjs') }, retry: { maxAttempts: 1 } }, { [quoted]: 'x', [inside]: 'x' });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    const retry = await runCli(['dead-letter', 'retry', '-c', ws.configPath, quoted]);
    expect(retry.code, retry.stdout + retry.stderr).toBe(1);
    expect(retry.stdout).toContain('named two items, and neither was requeued');
    expect(await states(ws.db)).toEqual(['dead', 'dead']);
    // Each of the forms the message gives names its one item.
    const forQuoted = /give ("\\"[^ ]+ [^ ]+ [^ ]+\\"")\)/.exec(retry.stdout)![1]!;
    const forInside = /give ("\\u[^)]+") for that one/.exec(retry.stdout)![1]!;
    expect((await runCli(['dead-letter', 'retry', '-c', ws.configPath, forInside])).code).toBe(0);
    expect(await states(ws.db)).toEqual(['dead', 'pending']);
    expect((await runCli(['dead-letter', 'retry', '-c', ws.configPath, forQuoted])).code).toBe(0);
    expect(await states(ws.db)).toEqual(['pending', 'pending']);
  }, 60_000);

  it('requeue --include-dead: alone it is that item; beside the item a listing prints as it, neither moves, exit 1, said in the listing and in --json (before: the other one was requeued, exit 0)', async () => {
    const alone = workspace({ handler: { module: path.join(FIXTURES, 'process/fail-some-module.mjs') }, retry: { maxAttempts: 1 } }, { [quoted]: 'x' });
    expect((await runCli(['run', '-c', alone.configPath])).code).toBe(0);
    const one = await runCli(['requeue', '--include-dead', '-c', alone.configPath, quoted]);
    expect(one.code, one.stdout + one.stderr).toBe(0);
    expect(await states(alone.db)).toEqual(['pending', undefined]);

    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/fail-some-module.mjs') }, retry: { maxAttempts: 1 } }, { [quoted]: 'x', [inside]: 'x' });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    const both = await runCli(['requeue', '--include-dead', '-c', ws.configPath, quoted]);
    expect(both.code, both.stdout + both.stderr).toBe(1);
    expect(both.stdout).toContain('both the item named so');
    expect(await states(ws.db)).toEqual(['dead', 'dead']);
    const json = await runCli(['requeue', '--include-dead', '--json', '-c', ws.configPath, quoted]);
    expect(json.code).toBe(1);
    expect((JSON.parse(json.stdout) as { notRequeued: unknown[] }).notRequeued).toEqual([{ id: quoted, state: 'ambiguous' }]);
    expect(await states(ws.db)).toEqual(['dead', 'dead']);
    const forInside = /give ("\\u[^)]+") for that one/.exec(both.stdout)![1]!;
    expect((await runCli(['requeue', '--include-dead', '-c', ws.configPath, forInside])).code).toBe(0);
    expect(await states(ws.db)).toEqual(['dead', 'pending']);
  }, 60_000);
});

describe('a quoted id that names two items, holding a C1 control and a bidirectional one (from list --json through jq -r)', () => {
  it('dead-letter retry and requeue name it and the other item escaped, never raw (before: U+009B and U+202E reached the terminal), in forms that read back', async () => {
    const inside = '\u009b2J \u202ecorrupt.exe';
    const quoted = `"${inside}"`;
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/fail-some-module.mjs') }, retry: { maxAttempts: 1 } }, { [quoted]: 'x', [inside]: 'x' });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    const retry = await runCli(['dead-letter', 'retry', '-c', ws.configPath, quoted]);
    const requeue = await runCli(['requeue', '--include-dead', '-c', ws.configPath, quoted]);
    for (const r of [retry, requeue]) {
      expect(r.code, r.stdout + r.stderr).toBe(1);
      expect(r.stdout).not.toMatch(/[\u007f-\u009f\u202e]/);
      expect(r.stdout).toContain('  "\\"\\u009b2J \\u202ecorrupt.exe\\"": both the item named so');
      expect(r.stdout).toContain('(give "\\u009b2J \\u202ecorrupt.exe" for that one)');
    }
    expect((await statusJson(ws.configPath)).items).toMatchObject({ dead: 2 });
    // The form given for the other item names it alone.
    expect((await runCli(['dead-letter', 'retry', '-c', ws.configPath, '"\\u009b2J \\u202ecorrupt.exe"'])).code).toBe(0);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ dead: 1, pending: 1 });
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

describe('an id that starts with a dash, pasted from a text listing', () => {
  // A file Linux allows is an item, "--all" and "-draft.scc" too. Printed bare, the pasted id
  // was an option: "--all" requeued every dead (or done) item, "-draft.scc" was exit 2.
  const handler = { command: ['sh', '-c', 'case "$CRONSAFE_ITEM_ID" in *done.scc) exit 0;; esac; exit 3'] };
  const files = { '--all': 'x', '-draft.scc': 'x', 'other.scc': 'x', '-done.scc': 'x', 'done.scc': 'x' };

  it('dead-letter list prints it as ./-id, and dead-letter retry takes that back as the one item', async () => {
    const ws = workspace({ handler, retry: { maxAttempts: 1 } }, files);
    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);
    const list = await runCli(['dead-letter', 'list', '-c', ws.configPath]);
    const printed = list.stdout.trimEnd().split('\n').map((l) => l.split('\t')[0]!);
    expect(printed.sort()).toEqual(['./--all', './-draft.scc', 'other.scc']);
    const one = await runCli(['dead-letter', 'retry', '-c', ws.configPath, './--all']);
    expect(one.code, one.stdout + one.stderr).toBe(0);
    expect(one.stdout).toBe('requeued 1 dead item\n');
    const two = await runCli(['dead-letter', 'retry', '-c', ws.configPath, './-draft.scc']);
    expect(two.code, two.stdout + two.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 2, dead: 1, done: 2 });
    const ledger = await openSqliteLedger(ws.db);
    try {
      expect((await ledger.get('--all'))?.state).toBe('pending');
      expect((await ledger.get('-draft.scc'))?.state).toBe('pending');
      expect((await ledger.get('other.scc'))?.state).toBe('dead');
    } finally {
      await ledger.close();
    }
  }, 60_000);

  it('requeue --dry-run prints it as ./-id, and requeue takes that back as the one item', async () => {
    const ws = workspace({ handler, retry: { maxAttempts: 1 } }, files);
    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);
    const dry = await runCli(['requeue', '--dry-run', '--glob', '-*', '-c', ws.configPath]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toBe('would requeue 1 item (dry run: nothing changed)\n  ./-done.scc\n');
    const r = await runCli(['requeue', '--json', '-c', ws.configPath, './-done.scc']);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ count: 1, first: ['-done.scc'], notRequeued: [] });
    expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 1, done: 1, dead: 3 });
  }, 60_000);
});

/**
 * No id holds NUL (no file name does, and PostgreSQL's text cannot), but one can be given as
 * JSON (`"a\u0000b"`, pasted or mistyped). On PostgreSQL it was bound as it was: 22021, the
 * whole command `state store unavailable` (exit 1), the dead ids given with it left dead.
 */
describe('dead-letter retry and requeue given an id holding NUL beside real ones', () => {
  const pg = PG_SKIP_REASON === undefined ? usePostgresDatabase('nulids', 60_000) : undefined;
  const ledgers = [['sqlite'], ...(pg ? [['postgres']] : [])];

  it.each(ledgers)('%s: it is not in the ledger (exit 1, named so); the others are requeued', async (ledger) => {
    const state = ledger === 'postgres' ? { postgres: pg!.url, schema: 'nulids' } : undefined;
    const handler = { module: path.join(FIXTURES, 'process/fail-some-module.mjs') };
    const ws = workspace({ handler, retry: { maxAttempts: 1 }, ...(state ? { state } : {}) }, { 'corrupt-1.scc': 'x', 'ok.scc': 'ok' });
    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);

    const retry = await runCli(['dead-letter', 'retry', '-c', ws.configPath, '"a\\u0000b"', 'corrupt-1.scc']);
    expect(retry.stderr).toBe('');
    expect(retry.stdout).toBe('requeued 1 dead item\n1 of the given ids was not a dead letter:\n  "a\\u0000b": unknown (not in the ledger)\n');
    expect(retry.code).toBe(1);

    const requeue = await runCli(['requeue', '-c', ws.configPath, '"a\\u0000b"', 'ok.scc']);
    expect(requeue.stderr).toBe('');
    expect(requeue.stdout).toContain('"a\\u0000b": unknown (not in the ledger)');
    expect(requeue.code).toBe(1);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 2, done: 0, dead: 0 });
  }, 90_000);
});
