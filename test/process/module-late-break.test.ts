/**
 * Handler code that breaks the process once cronsafe has let its module handler go (a timer
 * or callback an attempt left, firing after the run ended, before the process exits): Node
 * printed its raw report, the thrown message with a secret in it unredacted, and its stack.
 * Now one line says what happened, the secrets hidden; the exit is 1, as before.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, runCli, statusJson, workspace } from '../helpers/cli.js';

const MODULE = path.join(FIXTURES, 'process/late-break-module.mjs');
const SECRET = 'hunter2-late-secret';

describe('a module handler breaking the process after the run ended', () => {
  it('is told in one line with its secrets hidden, not by Node with the password', async () => {
    const ws = workspace({ handler: { module: MODULE }, log: { level: 'info' } }, { 'a.txt': 'a' });
    const r = await runCli(['run', '-c', ws.configPath], { env: { PGPASSWORD: SECRET } });
    // The run itself was done: its item is recorded.
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).not.toContain(SECRET);
    expect(r.stdout).not.toContain(SECRET);
    expect(r.stderr).toContain('cronsafe: handler code broke the process after its handler was let go (from a timer or callback an attempt left): uncaught exception: late failure, password ***');
    expect(r.stderr).not.toContain('Node.js v');
  });

  it("in an 'exit' listener of its own is told in one line with its secrets hidden, not as cronsafe's fatal error with the password", async () => {
    // The listener's throw came out of cronsafe's process.exit: `cronsafe: fatal:` and the raw
    // stack, the password in clear, for validate and run alike.
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/exit-listener-module.mjs') }, log: { level: 'info' } }, { 'a.txt': 'a' });
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', ws.configPath], { env: { PGPASSWORD: SECRET } });
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr + r.stdout).not.toContain(SECRET);
      expect(r.stderr).toContain("cronsafe: handler code broke the process as it exited: an 'exit' listener threw: clean-up failed, password ***");
      expect(r.stderr).not.toContain('cronsafe: fatal');
    }
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
  });
});
