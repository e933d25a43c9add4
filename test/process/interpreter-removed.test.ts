import { copyFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, runCli, statusJson, workspace } from '../helpers/cli.js';

// The handler's script names an interpreter of its own (a venv's python, here a copy of sh)
// that is removed during the run (an image layer swapped, an upgrade in place): the kernel's
// ENOENT for the next spawn read "command not found", of a script that is there. The stop
// (exit 1, nothing charged) now names the missing interpreter, as validate does.
describe("handler.command's #! interpreter removed mid-run", () => {
  it('stops the pass with exit 1, naming the interpreter; the item not started is not charged', async () => {
    const ws = workspace({ concurrency: 1 }, { 'a.txt': 'a', 'b.txt': 'b' });
    const shell = path.join(ws.dir, 'my-sh');
    copyFileSync('/bin/sh', shell);
    const script = path.join(ws.dir, 'qc.sh');
    writeFileSync(script, `#!${shell}\nrm -f "${shell}"\n`, { mode: 0o755 });
    configure(ws, { handler: { command: [script, '{path}'] } });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`cannot run handler.command ${JSON.stringify(script)}: ENOENT (${JSON.stringify(script)} has a #! interpreter ${JSON.stringify(shell)} that does not exist)`);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 1, claimed: 0, done: 1, dead: 0 });
  });
});
