/**
 * A disk quota used up on output.directory (a user's quota, an XFS or ext4 project quota on
 * the volume): writes there fail EDQUOT ("Disk quota exceeded") while statfs(2) still shows
 * the file system with room to spare, so the full-disk checks (statfs) never saw it. Every
 * item whose handler failed on it was charged, and dead-lettered after retry.maxAttempts
 * runs, each exiting 0; a handler that ignored its refused write (`cat "$1" > "$2"; exit 0`)
 * had its cut output committed as the item's done output, and the items after it, whose
 * {output} could not even be created, were recorded done with none. Now a used-up quota is
 * the full output file system it is to the items: the pass stops, exit 1, nothing charged,
 * no cut output committed.
 *
 * This kernel's tmpfs and ext4 have no quota support here, so the quota is an LD_PRELOAD shim
 * (helpers/quota-shim.ts: fixtures/process/quota-shim.c, built by gcc) in cronsafe and its
 * command handler alike: writes under output.directory past QUOTA_BYTES in all are
 * cut, then refused EDQUOT, and a new file there is refused once the quota is used up.
 */
import { readdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, finished, runCli, statusJson, workspace, type Workspace } from '../helpers/cli.js';
import { charged } from '../helpers/ledger-sums.js';
import { quotaEnv } from '../helpers/quota-shim.js';

const ITEM_BYTES = 6000;
const ITEMS = ['a.txt', 'b.txt', 'c.txt', 'd.txt', 'e.txt', 'f.txt'];
// Two outputs fit, with a block to spare (cronsafe's check as it commits one); the third is cut.
const QUOTA = 2 * ITEM_BYTES + 5000;

function quotaWorkspace(script: string): { ws: Workspace; env: NodeJS.ProcessEnv } {
  const ws = workspace({ concurrency: 1 }, Object.fromEntries(ITEMS.map((f) => [f, 'x'.repeat(ITEM_BYTES)])));
  const h = path.join(ws.dir, 'h.sh');
  writeFileSync(h, `#!/bin/sh\n${script}\n`, { mode: 0o755 });
  configure(ws, { handler: { command: [h, '{path}', '{output}'] } });
  return { ws, env: quotaEnv(ws.dir, ws.out, QUOTA) };
}

/** The outputs in output.directory (not cronsafe's temp directory) and their sizes. */
function outputs(ws: Workspace): Record<string, number> {
  const out: Record<string, number> = {};
  for (const e of readdirSync(ws.out, { withFileTypes: true })) if (e.isFile()) out[e.name] = statSync(path.join(ws.out, e.name)).size;
  return out;
}

async function expectStoppedUncharged(ws: Workspace, env: NodeJS.ProcessEnv): Promise<void> {
  for (let run = 1; run <= 2; run++) {
    const r = await runCli(['run', '-c', ws.configPath], { env });
    // Before: exit 0, the items that met the quota charged ("exit code 1: cat: ...: Disk quota
    // exceeded"), or done with a cut output or none.
    expect(r.code, `run ${run}: ${JSON.stringify(finished(r))}`).toBe(1);
    expect(JSON.stringify(finished(r)?.err)).toMatch(/output\.directory .* is full; stopping, nothing charged/);
  }
  const status = await statusJson(ws.configPath);
  expect(status.items).toEqual({ pending: ITEMS.length - 2, claimed: 0, done: 2, dead: 0 });
  expect(await charged(ws.db, ITEMS)).toBe(2);
  // Only whole outputs, one per item done: none cut short, none missing.
  const sizes = outputs(ws);
  expect(Object.keys(sizes)).toHaveLength(2);
  for (const [name, size] of Object.entries(sizes)) expect(size, name).toBe(ITEM_BYTES);
}

describe('a disk quota used up on output.directory (EDQUOT, statfs shows room)', () => {
  it('a handler that fails on it: the pass stops, exit 1, nothing charged, at every run', async () => {
    const { ws, env } = quotaWorkspace('cat "$1" > "$2"');
    await expectStoppedUncharged(ws, env);
  }, 60_000);

  it('a handler that ignores its refused writes and exits 0: no cut output committed, no item done without its output', async () => {
    const { ws, env } = quotaWorkspace('cat "$1" > "$2"; exit 0');
    await expectStoppedUncharged(ws, env);
  }, 60_000);
});
