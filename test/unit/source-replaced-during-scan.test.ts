import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { SourceGoneDuringScan } from '../../src/runner/faults.js';
import { planPass } from '../../src/runner/plan.js';
import { scanDirectory } from '../../src/runner/scan.js';

// A source directory (or one in it) removed, replaced by a file or by a link to itself while
// a scan walked it (a release swap gone wrong, `rm -r in; cp x in`): found with a flipper in
// round 35. A subdirectory's ELOOP ended the scan (a run: `run failed: ELOOP ...`; plan:
// `cronsafe: fatal:` and a stack), and the root's ENOENT or ELOOP ended `cronsafe plan` with
// `cronsafe: fatal:`. Another process flips the directory as fast as it can while the scan
// runs again and again.

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-scan-race-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const FLIPPER = `
const fs = require('node:fs');
const target = process.argv[1];
// The root is filled again each time (a scan of an empty one ends too soon to meet a flip);
// a subdirectory is left empty, to flip as fast as possible.
const fill = process.argv[2] === 'fill' ? () => { for (let i = 0; i < 20; i++) fs.writeFileSync(target + '/f' + i, 'x'); } : () => undefined;
process.stdout.write('ready\\n');
for (;;) {
  for (const put of [() => fs.writeFileSync(target, 'a file'), () => fs.symlinkSync(target, target), () => undefined]) {
    try { fs.rmSync(target, { recursive: true, force: true }); } catch {}
    try { put(); } catch {}
    try { fs.rmSync(target, { recursive: true, force: true }); } catch {}
    try { fs.mkdirSync(target); fill(); } catch {}
  }
}
`;

async function flipping<T>(target: string, fill: boolean, body: () => Promise<T>): Promise<T> {
  const flipper = spawn(process.execPath, ['-e', FLIPPER, target, fill ? 'fill' : 'empty'], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    await new Promise<void>((resolve, reject) => {
      flipper.stdout.once('data', () => resolve());
      flipper.once('exit', (code) => reject(new Error(`flipper exited ${code}`)));
    });
    return await body();
  } finally {
    flipper.kill('SIGKILL');
  }
}

function source(files: number): string {
  const src = path.join(dir, 'source');
  mkdirSync(path.join(src, 'sub'), { recursive: true });
  for (let i = 0; i < files; i++) writeFileSync(path.join(src, `a${i}.txt`), 'a');
  return src;
}

describe('a subdirectory of the source flipped while the scan walks it', () => {
  it('is skipped as one removed since its parent was listed, never an error', async () => {
    // Few files: many scans, each a chance to meet the subdirectory as it changes.
    const src = source(5);
    const raw = await flipping(path.join(src, 'sub'), false, async () => {
      const errors: string[] = [];
      for (let i = 0; i < 5000 && errors.length === 0; i++) {
        try {
          let n = 0;
          for await (const _ of scanDirectory({ directory: src, include: ['**'], exclude: [] })) n++;
          expect(n).toBeGreaterThanOrEqual(5);
        } catch (err) {
          errors.push(String((err as Error).stack ?? err));
        }
      }
      return errors;
    });
    expect(raw).toEqual([]);
  }, 120_000);
});

describe('source.directory flipped while `cronsafe plan` scans it', () => {
  it('ends the plan in one line (SourceGoneDuringScan), never with a raw ENOENT, ENOTDIR or ELOOP', async () => {
    const src = source(50);
    const file = path.join(dir, 'cronsafe.yaml');
    writeFileSync(file, `name: job\nsource: {directory: ${src}}\nhandler: {command: [/bin/true]}\nstate: {sqlite: ${dir}/job.db}\n`);
    const config = loadConfig(file);
    const { raw, refused } = await flipping(src, true, async () => {
      const errors: string[] = [];
      let gone = 0;
      for (let i = 0; i < 600 && errors.length === 0; i++) {
        try {
          await planPass({ config, ledger: null, now: Date.now(), limit: 5 });
        } catch (err) {
          if (err instanceof SourceGoneDuringScan) gone++;
          else errors.push(String((err as Error).stack ?? err));
        }
      }
      return { raw: errors, refused: gone };
    });
    expect(raw).toEqual([]);
    // The race was run, not avoided.
    expect(refused).toBeGreaterThan(0);
  }, 120_000);
});
