/**
 * Linux refuses an execve whose argv or environment string is over MAX_ARG_STRLEN (128 KiB)
 * or whose strings together pass a quarter of the stack limit (2 MiB by default): the spawn
 * fails with E2BIG. A handler.env value (or a literal handler.command argument) that big made
 * every handler fail to start, yet `validate` said OK and each run charged every item until
 * the whole backlog was dead-lettered. It is a config error (exit 78) naming the key.
 */
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';

const BIG = 140_000;

describe('handler.command children that Linux could never start (E2BIG)', () => {
  it('a handler.env value over 128 KiB: validate and run exit 78 naming the key, without its value, and no item is charged', async () => {
    const secret = `s3cr3t-${'x'.repeat(BIG)}`;
    const ws = workspace({ handler: { command: ['/bin/true'], env: { BIG: secret } } }, { 'a.txt': 'a', 'b.txt': 'b' });
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', ws.configPath]);
      expect(r.code, `${cmd}: ${r.stderr.slice(0, 500)}`).toBe(78);
      expect(r.stderr).toContain(`handler.env.BIG: is ${BIG + 'BIG=s3cr3t-'.length} bytes as NAME=value; Linux takes no environment string over 131071 bytes (MAX_ARG_STRLEN)`);
      expect(r.stderr).not.toContain('s3cr3t');
    }
    // Before: validate exited 0, and the run 0 with both items failed "E2BIG (spawn E2BIG)", charged.
    expect(existsSync(ws.db)).toBe(false);
  });

  it('a literal handler.command argument over 128 KiB: exit 78 naming it', async () => {
    const ws = workspace({ handler: { command: ['/bin/echo', `--data=${'y'.repeat(BIG)}`, '{path}'] } }, { 'a.txt': 'a' });
    const r = await runCli(['validate', '-c', ws.configPath]);
    expect(r.code, r.stderr.slice(0, 500)).toBe(78);
    expect(r.stderr).toContain(`handler.command[1]: is ${BIG + '--data='.length} bytes long`);
  });

  it('strings each small enough but over 6 MiB together (a variable interpolated into handler.env again and again), past the limit whatever ulimit -s is: exit 78', async () => {
    const env = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`COPY${i}`, '${PAYLOAD}']));
    const ws = workspace({ handler: { command: ['/bin/true'], env } }, { 'a.txt': 'a' });
    const r = await runCli(['run', '-c', ws.configPath], { env: { PAYLOAD: 'z'.repeat(127_000) } });
    expect(r.code, r.stderr.slice(0, 500)).toBe(78);
    expect(r.stderr).toMatch(/handler\.env: the handler's argv and environment \(cronsafe's own environment and handler\.env\) come to at least \d+ bytes, over the \d+ Linux allows/);
    expect(existsSync(ws.db)).toBe(false);
    // Within the limits it runs: 127,000 bytes is a value Linux takes.
    const fits = workspace({ handler: { command: ['/bin/true'], env: { ONE: '${PAYLOAD}' } } }, { 'a.txt': 'a' });
    const ok = await runCli(['run', '-c', fits.configPath], { env: { PAYLOAD: 'z'.repeat(127_000) } });
    expect(ok.code, ok.stderr.slice(0, 500)).toBe(0);
    expect(ok.lines.find((l) => l.msg === 'run finished')).toMatchObject({ counts: { succeeded: 1, failed: 0 } });
  });
});
