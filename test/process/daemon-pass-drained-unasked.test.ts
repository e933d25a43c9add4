import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, statusJson, workspace } from '../helpers/cli.js';
import { LIBFAKETIME, passRunAgain, spawnFastCli } from '../helpers/faketime.js';

// A pass that drains with no stop asked: what it relies on was lost (here its SQLite ledger,
// removed with the state directory during the pass; a PostgreSQL run lock or a Lease lost
// likewise). `cronsafe run` exits 75 and the Job controller runs it again; a daemon restarted
// then resumes it at once. A daemon that stayed up left the occurrence there: its backlog
// waited for the next occurrence (a day, for a daily job). It runs the pass again, as it
// does a failed one.

describe.skipIf(LIBFAKETIME === undefined)('cronsafe daemon, a pass that drained with no stop', () => {
  it('is run again for its occurrence, as a failed pass is', async () => {
    const ws = workspace({ schedule: { cron: '0 0 * * *', timeZone: 'UTC' } }, { 'a.txt': 'a' });
    const once = path.join(ws.dir, 'remove-state-once');
    writeFileSync(once, '');
    // The first attempt removes the state directory (a cleaner, an operator), then succeeds.
    const handler = path.join(ws.dir, 'handler.mjs');
    writeFileSync(
      handler,
      `import { existsSync, rmSync, writeFileSync } from 'node:fs';
export default async function (item, ctx) {
  if (existsSync(${JSON.stringify(once)})) {
    rmSync(${JSON.stringify(once)});
    rmSync(${JSON.stringify(ws.state)}, { recursive: true, force: true });
  }
  writeFileSync(ctx.outputPath, item.id);
}
`,
    );
    configure(ws, { handler: { module: handler } });
    const daemon = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 12:00:30', { timeoutMs: 90_000 });
    // Before: nothing until the next occurrence, 12 hours (12 real minutes) on.
    await passRunAgain(daemon, 'drained');
    expect(existsSync(once)).toBe(false);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
  }, 60_000);
});
