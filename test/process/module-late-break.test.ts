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

  it('is told in one line with its control characters escaped (a newline, ESC, CSI), from a timer or an exit listener alike', async () => {
    // Raw, a newline broke "one line" in two and ESC / U+009B drove the terminal of whoever
    // ran cronsafe or read `kubectl logs`, as `run failed:` never does.
    const TAIL = '\nsecond line \u001b[31mred\u001b[0m \u009b2J';
    for (const [fixture, said] of [
      ['late-break-module.mjs', 'after its handler was let go (from a timer or callback an attempt left): uncaught exception: late failure, password ***'],
      ['exit-listener-module.mjs', "as it exited: an 'exit' listener threw: clean-up failed, password ***"],
    ] as const) {
      const ws = workspace({ handler: { module: path.join(FIXTURES, 'process', fixture) }, log: { level: 'info' } }, { 'a.txt': 'a' });
      const r = await runCli(['run', '-c', ws.configPath], { env: { PGPASSWORD: SECRET, FIXTURE_TAIL: TAIL } });
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(`cronsafe: handler code broke the process ${said}\\u000asecond line \\u001b[31mred\\u001b[0m \\u009b2J\n`);
      expect(r.stderr).not.toMatch(/[\u001b\u009b]/);
      expect(r.stderr).not.toContain(SECRET);
    }
  });
});
