import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { OutputStore } from '../../src/runner/output.js';
import { OutputUnwritable } from '../../src/runner/faults.js';

// A daemon's pass prepared output.directory while someone replaced it by a file (`rm -r out;
// cp report out`): the look at its temp directory below it failed with ENOTDIR (or ENOENT),
// which was not said in one line but ended the daemon with `cronsafe: fatal:` and a stack
// (seen once in CI, daemon-output-not-a-directory). Here another process flips the directory
// and a file as fast as it can while prepare() runs again and again: every refusal must be
// the one-line OutputUnwritable.

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-prepare-race-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const FLIPPER = `
const fs = require('node:fs');
const out = process.argv[1];
process.stdout.write('ready\\n');
for (;;) {
  try { fs.rmSync(out, { recursive: true, force: true }); } catch {}
  try { fs.writeFileSync(out, 'not a directory'); } catch {}
  try { fs.rmSync(out, { force: true, recursive: true }); } catch {}
  try { fs.mkdirSync(out); } catch {}
  // A link to itself on its way (a botched \`ln -sfn\`): ELOOP, the same fault.
  try { fs.rmSync(out, { recursive: true, force: true }); } catch {}
  try { fs.symlinkSync(out, out); } catch {}
  try { fs.rmSync(out, { force: true, recursive: true }); } catch {}
  try { fs.mkdirSync(out); } catch {}
}
`;

describe('OutputStore.prepare while output.directory is replaced by a file', () => {
  it('refuses in one line (OutputUnwritable), never with a raw ENOTDIR, ENOENT or ELOOP', async () => {
    const out = path.join(dir, 'out');
    const flipper = spawn(process.execPath, ['-e', FLIPPER, out], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      await new Promise<void>((resolve, reject) => {
        flipper.stdout.once('data', () => resolve());
        flipper.once('exit', (code) => reject(new Error(`flipper exited ${code}`)));
      });
      const raw: string[] = [];
      let refused = 0;
      let prepared = 0;
      for (let i = 0; i < 3000 && raw.length === 0; i++) {
        try {
          await new OutputStore(out).prepare();
          prepared++;
        } catch (err) {
          if (err instanceof OutputUnwritable) refused++;
          else raw.push(String((err as Error).stack ?? err));
        }
      }
      expect(raw).toEqual([]);
      // Both ends were met: the race was run, not avoided.
      expect(refused).toBeGreaterThan(0);
      expect(prepared + refused).toBeGreaterThan(0);
    } finally {
      flipper.kill('SIGKILL');
    }
  }, 60_000);
});
