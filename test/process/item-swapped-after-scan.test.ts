import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, finished, runCli, statusJson, workspace, type Workspace } from '../helpers/cli.js';

// The first item's handler replaces the other item's file after the scan (a producer, or
// another user with write access to the source), then copies its own input to its output.
// The scan never takes a link to cronsafe's own files (the ledger, the config) as an item,
// nor a FIFO: an attempt must not hand one to its handler either. It used to ask only
// whether something was there, so the copying handler put the live ledger, or the config
// and its secrets, into output.directory, and a FIFO had the handler block on it until its
// timeout (5 minutes by default).
function swapThenCopy(ws: Workspace, replace: string): void {
  const swap =
    'd=$(dirname "$0"); o=$d/$([ "$(basename "$0")" = a ] && echo b || echo a); ' +
    `echo "$0" >> "${path.join(ws.dir, 'starts')}"; [ -e "$d/.swapped" ] || { : > "$d/.swapped"; rm -f "$o"; ${replace}; }; cat -- "$0" > "$1"`;
  configure(ws, { handler: { command: ['sh', '-c', swap, '{path}', '{output}'], timeoutSeconds: 20 }, concurrency: 1 });
}

describe('an item replaced after the scan by something the scan would not take as an item', () => {
  it.each([
    ['a link to the config file', (ws: Workspace) => `ln -s "${ws.configPath}" "$o"`],
    ['a link to the SQLite ledger', (ws: Workspace) => `ln -s "${ws.db}" "$o"`],
    ['a FIFO', () => 'mkfifo "$o"'],
  ])('%s: forgotten as gone, its handler not run', async (_what, replace) => {
    const ws = workspace({}, { a: 'A', b: 'B' });
    swapThenCopy(ws, replace(ws));
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    const outputs = ['a.out', 'b.out'].filter((f) => existsSync(path.join(ws.out, f)));
    expect(outputs).toHaveLength(1);
    expect(readFileSync(path.join(ws.dir, 'starts'), 'utf8').trim().split('\n')).toHaveLength(1);
    expect(['A', 'B']).toContain(readFileSync(path.join(ws.out, outputs[0]!), 'utf8'));
    const counts = finished(r)?.counts as Record<string, number>;
    expect(counts).toMatchObject({ succeeded: 1, failed: 0, gone: 1 });
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
  });
});
