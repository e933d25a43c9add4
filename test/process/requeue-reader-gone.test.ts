/**
 * `cronsafe requeue --json --all | true` (and `dead-letter retry --all | true`): the reader
 * left before the report, and the command exited 1 with `output incomplete`, as every report
 * does then (docs/operations.md), but with nothing said of the requeue itself, which had been
 * made: read as a failed requeue, and run again, it requeued nothing. The exit stays 1 and
 * the same line now says what was done; the items are pending again, none lost.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { FIXTURES, intoClosedPipe, runCli, statusJson, workspace, type Workspace } from '../helpers/cli.js';

const CUT = 'cronsafe: output incomplete: stdout was closed before everything was written (EPIPE)';

async function doneWorkspace(n: number): Promise<Workspace> {
  const files = Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}.txt`, String(i)]));
  const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') } }, files);
  const run = await runCli(['run', '-c', ws.configPath]);
  expect(run.code, run.stderr).toBe(0);
  return ws;
}

describe('requeue and dead-letter retry into a reader that left', () => {
  it.each([
    [['--json', '--all'], '3 items', { pending: 3, claimed: 0, done: 0, dead: 0 }],
    [['f1.txt'], '1 item', { pending: 1, claimed: 0, done: 2, dead: 0 }],
  ])('requeue %j: exit 1, the line says the requeue was done (%s); the items pending again', async (args, said, items) => {
    const ws = await doneWorkspace(3);
    const r = await intoClosedPipe(['requeue', ...args, '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toBe(`${CUT}; the requeue itself was done: ${said} requeued (pending again, attempts reset)\n`);
    expect((await statusJson(ws.configPath)).items).toEqual(items);
  }, 120_000);

  it('requeue --dry-run changed nothing, and says nothing of a requeue', async () => {
    const ws = await doneWorkspace(2);
    const r = await intoClosedPipe(['requeue', '--json', '--all', '--dry-run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toBe(`${CUT}\n`);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
  }, 120_000);

  it('dead-letter retry --all: exit 1, the line says the retry was done; every dead item pending again', async () => {
    const ws = await doneWorkspace(0); // a run has named the ledger's job
    // Dead letters as a run leaves them, without five runs' backoffs: one attempt each, failed.
    const ledger = await openSqliteLedger(ws.db);
    try {
      const now = Date.now();
      const claimable = await ledger.discover([{ id: 'a.scc' }, { id: 'b.scc' }], { runId: 'seed', now });
      const claims = await ledger.claim(claimable, { owner: 'seed', runId: 'seed', now, leaseMs: 60_000 });
      await ledger.fail(claims.map((claim) => ({ claim, error: 'exit 1' })), { now, retry: { maxAttempts: 1, backoffMs: 0, backoffMaxMs: 0 } });
    } finally {
      await ledger.close();
    }
    const r = await intoClosedPipe(['dead-letter', 'retry', '--all', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toBe(`${CUT}; the retry itself was done: 2 dead items requeued (pending again, attempts reset)\n`);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 2, claimed: 0, done: 0, dead: 0 });
  }, 120_000);
});
