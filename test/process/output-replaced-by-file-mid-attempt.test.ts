import { readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { finished, runCli, statusJson, workspace } from '../helpers/cli.js';

/**
 * A module handler that plays `rm -r out; cp report out` while its attempt runs: it replaces
 * output.directory by a file, then fails to write its output there (ENOTDIR), as every handler
 * running then does. The clean-up's look at cronsafe's temp directory below it failed with
 * ENOTDIR too, which was taken for no finding at all: the item was charged an attempt for
 * the environment's fault (found with a flipper on output.directory, round 35).
 */
const REPLACER = `import { rmSync, symlinkSync, writeFileSync } from 'node:fs';
export default async function (item, ctx) {
  const out = process.env.TEST_OUT;
  rmSync(out, { recursive: true, force: true });
  if (process.env.TEST_LOOP === '1') symlinkSync(out, out);
  else writeFileSync(out, 'a report copied over output.directory');
  writeFileSync(ctx.outputPath, 'never written');
}
`;

describe.each([
  ['a file', false],
  // A link to itself (a botched `ln -sfn`): the look at output.directory itself then threw
  // ELOOP, the item charged as well.
  ['a link to itself', true],
])('output.directory replaced by %s while an attempt runs', (_, loop) => {
  it('stops the pass in one line, the item handed back uncharged', async () => {
    const ws = workspace({ handler: { module: 'replacer.mjs' }, concurrency: 1 }, { 'a.txt': 'a' });
    writeFileSync(path.join(ws.dir, 'replacer.mjs'), REPLACER);
    const r = await runCli(['run', '-c', ws.configPath], { env: { TEST_OUT: ws.out, TEST_LOOP: loop ? '1' : '0' } });
    if (loop) expect(readlinkSync(ws.out)).toBe(ws.out);
    else expect(readFileSync(ws.out, 'utf8')).toBe('a report copied over output.directory');
    const said = `cronsafe: run failed: output.directory ${ws.out} vanished or was replaced during the run; stopping (nothing charged)\n`;
    // Before: exit 0, the item charged with "ENOTDIR: not a directory, open '.../out/.cronsafe-tmp/...'".
    expect(r.stderr).toBe(said);
    expect(r.code).toBe(1);
    expect(finished(r)).toMatchObject({ outcome: 'failed', exitCode: 1 });
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 1, claimed: 0, done: 0, dead: 0 });
    const ledger = await openSqliteLedger(ws.db);
    try {
      const item = await ledger.get('a.txt');
      expect(item!.attempts - item!.released).toBe(0);
    } finally {
      await ledger.close();
    }
  }, 60_000);
});
