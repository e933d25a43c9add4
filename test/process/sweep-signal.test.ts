/**
 * After the scan, the sweep claims items that already had an attempt. On SQLite its claims
 * are synchronous and a module handler can settle at once, so the claim loop ran entirely
 * in the microtask queue: a SIGTERM there was not seen until the sweep ended (a kubelet's
 * SIGKILL first), and no progress line or heartbeat was written meanwhile. Found with
 * 49,000 items requeued during a 1,000,000-item run: SIGTERM ignored for minutes.
 */
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { finished, spawnCli, workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

const ITEMS = 3000;

describe('a SIGTERM during the sweep', () => {
  it('drains at once (exit 75), however fast the handler settles', async () => {
    const files: Record<string, string> = {};
    for (let i = 0; i < ITEMS; i++) files[`i${i}.txt`] = String(i);
    // backoffSeconds 0: the failed items are due again at once, so the sweep has them all.
    const ws = workspace({ handler: { module: 'handler.mjs' }, retry: { backoffSeconds: 0 }, log: { level: 'info' } }, files);
    const marker = path.join(ws.dir, 'sweeping');
    // Fails the first two attempts (the second one is the sweep's), then succeeds at once
    // and says so: the test's readiness signal that the sweep is under way.
    writeFileSync(
      path.join(ws.dir, 'handler.mjs'),
      `import { writeFileSync } from 'node:fs';
export default async function (item, ctx) {
  if (ctx.attempt < 3) throw new Error('not yet');
  writeFileSync(${JSON.stringify(marker)}, 'x');
}
`,
    );
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    await until(() => existsSync(marker), 'the sweep succeeding items', 100_000);
    const at = Date.now();
    run.child.kill('SIGTERM');
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(75);
    expect(Date.now() - at).toBeLessThan(10_000);
    expect(finished(run)?.outcome).toBe('drained');
    expect((finished(run)?.counts as { succeeded: number }).succeeded).toBeLessThan(ITEMS);
  }, 150_000);
});
