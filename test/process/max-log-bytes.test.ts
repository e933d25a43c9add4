import { describe, expect, it } from 'vitest';
import { runCli, statusJson, workspace } from '../helpers/cli.js';

describe('handler.maxLogBytes: 0', () => {
  it('keeps no handler output and says nothing per attempt; a failure still carries the last of stderr', async () => {
    // A chatty handler: one line on each stream, then a failure for one item.
    const script = 'echo "progress of $1"; echo "warning about $1" >&2; case "$1" in *bad*) exit 3;; esac';
    const ws = workspace(
      {
        handler: { command: ['sh', '-c', script, 'sh', '{id}'], maxLogBytes: 0 },
        retry: { maxAttempts: 1, backoffSeconds: 0, backoffMaxSeconds: 0 },
        log: { level: 'info' },
      },
      { 'a.txt': 'a', 'b.txt': 'b', 'c-bad.txt': 'c' },
    );
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    // Not one line per attempt about output it was told to drop, nor the output itself.
    expect(r.lines.filter((l) => /maxLogBytes/.test(l.msg))).toEqual([]);
    expect(r.lines.filter((l) => l.stream !== undefined)).toEqual([]);
    expect(r.lines.filter((l) => l.level === 'warn' || l.level === 'error').map((l) => l.msg)).toEqual(['item dead-lettered']);
    const dead = r.lines.find((l) => l.msg === 'item dead-lettered');
    expect(dead?.itemId).toBe('c-bad.txt');
    expect(dead?.error).toBe('exit code 3: warning about c-bad.txt');
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 1 });
  });
});
