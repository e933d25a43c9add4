/**
 * A handler whose stderr holds a NUL byte (a binary tool's output) on the PostgreSQL ledger.
 * PostgreSQL's text cannot hold NUL (22021), so the write of the failure failed: the run
 * stopped with exit 1 ("invalid byte sequence for encoding UTF8: 0x00"), the other attempts
 * with it, and the item stayed claimed until its lease ran out, to fail the next run the
 * same way. Now the failure is recorded (the NUL as U+FFFD, as bytes that are not UTF-8 are)
 * and the item is retried or dead-lettered like any other.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { finished, runCli, statusJson, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a NUL in a handler error', () => {
  let server: PgServer;
  let url = '';
  beforeAll(async () => {
    server = await startPostgres();
    url = await server.createDatabase('nulerr');
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('is recorded as the last error (U+FFFD for the NUL): the item is dead-lettered, the others done, the run completes', async () => {
    const handler = 'case "$1" in *bad*) printf "bin\\000ary out" >&2; exit 3;; esac; cp "$1" "$2"';
    const ws = workspace(
      { handler: { command: ['sh', '-c', handler, 'sh', '{path}', '{output}'] }, retry: { maxAttempts: 1 }, state: { postgres: url, schema: 'nul_err' } },
      { 'bad.bin': 'x', 'a.txt': 'a', 'b.txt': 'b' },
    );
    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);
    expect(finished(run)).toMatchObject({ outcome: 'completed', counts: { succeeded: 2, deadLettered: 1 } });
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 1 });
    const list = await runCli(['dead-letter', 'list', '--json', '-c', ws.configPath]);
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toEqual([expect.objectContaining({ id: 'bad.bin', attempts: 1, lastError: 'exit code 3: bin\ufffdary out' })]);
  }, 60_000);
});
