/**
 * Two items whose names are one text in two Unicode normal forms (`café.scc` typed on Linux,
 * NFC, and the same name from a Mac, NFD: `e` and a combining U+0301) are two files and two
 * ids, but a terminal draws them alike. The text listings printed both bare, identical:
 * `dead-letter retry café.scc` (typed, NFC) then moved the other one than the one meant, or
 * said "unknown" of the item the listing showed. An id that is not in NFC is now printed
 * JSON-quoted with its non-ASCII characters escaped, and taken back as printed.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { FIXTURES, runCli, workspace } from '../helpers/cli.js';

const NFC = 'corrupt-caf\u00e9.scc';
const NFD = 'corrupt-cafe\u0301.scc';

describe('ids that differ only in their Unicode normal form, in the text listings', () => {
  it('dead-letter list and requeue --dry-run print them differently; dead-letter retry of the printed NFD form moves that item only', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/fail-some-module.mjs') }, retry: { maxAttempts: 1 } }, { [NFC]: 'x', [NFD]: 'x' });
    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);

    const list = await runCli(['dead-letter', 'list', '-c', ws.configPath]);
    expect(list.code, list.stderr).toBe(0);
    const printed = list.stdout.trimEnd().split('\n').map((l) => l.split('\t')[0]!);
    expect(printed.sort()).toEqual(['"corrupt-cafe\\u0301.scc"', NFC].sort());

    const dry = await runCli(['requeue', '--all', '--include-dead', '--dry-run', '-c', ws.configPath]);
    expect(dry.stdout).toContain('  "corrupt-cafe\\u0301.scc"\n');
    expect(dry.stdout).toContain(`  ${NFC}\n`);

    const retry = await runCli(['dead-letter', 'retry', '-c', ws.configPath, '"corrupt-cafe\\u0301.scc"']);
    expect(retry.stdout + retry.stderr).toBe('requeued 1 dead item\n');
    expect(retry.code).toBe(0);
    const ledger = await openSqliteLedger(ws.db);
    try {
      expect((await ledger.get(NFD))?.state).toBe('pending');
      expect((await ledger.get(NFC))?.state).toBe('dead');
    } finally {
      await ledger.close();
    }
  }, 60_000);
});
