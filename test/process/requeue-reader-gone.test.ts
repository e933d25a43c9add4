/**
 * `cronsafe requeue --json --all | true` (and `dead-letter retry --all | true`): the reader
 * left before the report, and the command exited 1 with `output incomplete`, as every report
 * does then (docs/operations.md), but with nothing said of the requeue itself, which had been
 * made: read as a failed requeue, and run again, it requeued nothing. The exit stays 1 and
 * the same line now says what was done; the items are pending again, none lost.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { CLI, FIXTURES, runCli, statusJson, workspace, type Workspace } from '../helpers/cli.js';

/** The CLI with stdout on a pipe whose reader is gone (closed before the CLI starts writing). */
async function intoClosedPipe(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const cli = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  // Our end closed at once: node takes far longer to start than this to run.
  cli.stdout.destroy();
  let stderr = '';
  cli.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const hard = setTimeout(() => cli.kill('SIGKILL'), 120_000);
  const code = await new Promise<number | null>((resolve) => cli.on('exit', (c) => resolve(c)));
  clearTimeout(hard);
  return { code, stderr };
}

const CUT = 'cronsafe: output incomplete: stdout was closed before everything was written (EPIPE)';

async function doneWorkspace(n: number): Promise<Workspace> {
  const files = Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}.txt`, String(i)]));
  const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') } }, files);
  const run = await runCli(['run', '-c', ws.configPath]);
  expect(run.code, run.stderr).toBe(0);
  return ws;
}

describe('requeue and dead-letter retry into a reader that left', () => {
  it('requeue --json --all: exit 1, the line says the requeue was done; every item pending again', async () => {
    const ws = await doneWorkspace(3);
    const r = await intoClosedPipe(['requeue', '--json', '--all', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toBe(`${CUT}; the requeue itself was done: 3 items requeued (pending again, attempts reset)\n`);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 3, claimed: 0, done: 0, dead: 0 });
  }, 120_000);

  it('requeue by ids, text report: the same', async () => {
    const ws = await doneWorkspace(2);
    const r = await intoClosedPipe(['requeue', 'f1.txt', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toBe(`${CUT}; the requeue itself was done: 1 item requeued (pending again, attempts reset)\n`);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 1, claimed: 0, done: 1, dead: 0 });
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
