/**
 * A handler that makes the directory its {output} is in (cronsafe's own temp directory,
 * `.cronsafe-tmp/job-<name>`) read-only for its owner: `chmod 555 "$(dirname "$2")"`, or a
 * `tar -x` or `cp -a` there of a tree whose top is read-only. Before, every later run ended
 * at its start (exit 1, "cannot create or write in .../job-<name>") until someone gave the
 * rights back by hand, and the item was never charged; and one that exited 0 after it stopped
 * every run at its item (its output's rename refused), never charged either. As an
 * unprivileged user: root ignores the modes.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, runCli, statusJson, workspace } from '../helpers/cli.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { charged } from '../helpers/ledger-sums.js';
import { chownTree, NOBODY } from '../helpers/users.js';

const isRoot = process.getuid?.() === 0;
const HANDLER = ['/bin/sh', path.join(FIXTURES, 'process/read-only-output-dir.sh'), '{path}', '{output}'];

/** The state of `id` in the ledger at `db`, read directly (no CLI start between runs). */
async function stateOf(db: string, id: string): Promise<string | undefined> {
  const ledger = await openSqliteLedger(db);
  try {
    return (await ledger.get(id))?.state;
  } finally {
    await ledger.close();
  }
}

// The three cases share nothing and mostly wait on their runs: side by side. Each starts a
// dozen runs one after another, which a loaded machine took past 120 s: the timeout only
// stops a hang, and a run's start there is no fault of the product.
describe.skipIf(!isRoot)('a handler that makes the directory of its {output} read-only', () => {
  it.concurrent.each([
    ['and fails', { EXIT: '3' }],
    ['and exits 0', { EXIT: '0' }],
    ['(.cronsafe-tmp itself, mode 000) and fails', { EXIT: '3', RO_UP: '1', RO_MODE: '000' }],
  ])('%s: the next runs start, the item is charged after retry.maxAttempts hand-backs and dead-lettered; the others are done', async (_name, env: Record<string, string>) => {
    // Backoff shortened to iterate; retry.maxAttempts is the default (5).
    const ws = workspace(
      { handler: { command: HANDLER, env: { BAD_ID: 'bad.txt', ...env } }, retry: { backoffSeconds: 0, backoffMaxSeconds: 0 } },
      { 'bad.txt': 'bad\n', 'good.txt': 'good\n' },
    );
    chownTree(ws.dir, NOBODY);
    const as = { uid: NOBODY, gid: NOBODY };
    const first = await runCli(['run', '-c', ws.configPath], as);
    expect(first.code, first.stderr).toBe(1);
    expect(await charged(ws.db, ['bad.txt'])).toBe(0);
    // Uncharged hand-backs up to retry.maxAttempts, then one charge per run up to it again.
    for (let run = 2; run <= 12 && (await stateOf(ws.db, 'bad.txt')) !== 'dead'; run++) {
      const r = await runCli(['run', '-c', ws.configPath], as);
      // Before: exit 1 at the start, "cannot create or write in .../job-test-job", on every run.
      expect(r.stderr).not.toMatch(/cannot create or write in/);
    }
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 1 });
    expect(await charged(ws.db, ['bad.txt'])).toBe(5);
    const next = await runCli(['run', '-c', ws.configPath], as);
    expect(next.code, next.stderr).toBe(0);
  }, 300_000);
});
