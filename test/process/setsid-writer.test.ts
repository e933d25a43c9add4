/**
 * A command handler that leaves a writer of its {output} behind in a session of its own
 * (`setsid`, Python's `start_new_session=True`): that process is not in the handler's group,
 * so it is not ended when the handler exits, and it still holds the temp file open. The
 * output was committed (renamed into place, the item recorded done), and the writer then
 * appended to the committed output: a "done" output that changed after its commit.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { configure, finished, runCli, statusJson, workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

const gates: string[] = [];
afterEach(() => {
  // Let a writer still waiting end (a failed assertion must not leave it behind).
  for (const gate of gates.splice(0)) writeFileSync(gate, '');
});

describe("a handler's writer of {output} left running outside its session (setsid)", () => {
  it('the output is not committed while it is open for writing there: the attempt fails, and nothing changes a committed output', async () => {
    const ws = workspace({ log: { level: 'info' } }, { 'a.txt': 'a\n', 'b.txt': 'b\n' });
    const gate = path.join(ws.dir, 'go');
    const wrote = path.join(ws.dir, 'late-written');
    gates.push(gate);
    const handler = path.join(ws.dir, 'leaves-writer.sh');
    // Item a: writes its output, keeps it open on fd 3 for a detached writer that appends
    // once the test says go, and exits 0 at once. Item b: a plain copy.
    writeFileSync(
      handler,
      [
        '#!/bin/sh',
        'cat "$1" > "$2"',
        'if [ "$CRONSAFE_ITEM_ID" = a.txt ]; then',
        '  exec 3>>"$2"',
        `  setsid sh -c 'while [ ! -e "${gate}" ]; do sleep 0.05; done; echo LATE >&3; : > "${wrote}"' </dev/null >/dev/null 2>&1 &`,
        'fi',
        'exit 0',
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
    configure(ws, { handler: { command: [handler, '{path}', '{output}'] } });

    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    const failed = r.lines.find((l) => l.msg === 'item failed; will retry');
    expect(failed?.itemId).toBe('a.txt');
    expect(String(failed?.error)).toMatch(/outside its session \(started with setsid\) still has its output open for writing: not committed/);
    expect(finished(r)?.counts).toMatchObject({ succeeded: 1, failed: 1 });
    // Before: a.txt done, its output committed, then appended to by the writer below.
    expect(existsSync(path.join(ws.out, 'a.txt.out'))).toBe(false);
    expect(readFileSync(path.join(ws.out, 'b.txt.out'), 'utf8')).toBe('b\n');
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 1, claimed: 0, done: 1, dead: 0 });

    // The writer goes on, into a temp file that is no longer anything's output.
    writeFileSync(gate, '');
    await until(() => existsSync(wrote), 'the detached writer to write');
    expect(existsSync(path.join(ws.out, 'a.txt.out'))).toBe(false);
  });
});
