import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { FIXTURES, finished, runCli, spawnCli, statusJson, workspace } from '../helpers/cli.js';

const ITEMS = 300;

function backlog(): Record<string, Buffer> {
  const files: Record<string, Buffer> = {};
  for (let i = 0; i < ITEMS; i++) files[`batch-${i % 7}/item-${i}.scc`] = randomBytes(100 + ((i * 37) % 3000));
  return files;
}

function expectWholeOutputs(ws: { source: string; out: string }, files: Record<string, Buffer>) {
  for (const [id, input] of Object.entries(files)) {
    const out = readFileSync(path.join(ws.out, `${id}.out`));
    const expected = Buffer.concat([input, Buffer.from(`\n--cronsafe-test-footer ${input.length}\n`)]);
    expect(out.equals(expected), `output of ${id} is whole`).toBe(true);
  }
  // Exactly one output per item: nothing else beside them, no temp litter.
  const outFiles = readdirSync(ws.out, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => path.relative(ws.out, path.join(d.parentPath, d.name)));
  expect(outFiles.sort()).toEqual(Object.keys(files).map((id) => `${id}.out`).sort());
}

describe('SIGKILL at random points, then a clean run', () => {
  it.each([
    ['module handler', { module: path.join(FIXTURES, 'process/copy-module.mjs') }],
    ['command handler', { command: [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'] }],
  ])('loses nothing with a %s', async (_name, handler) => {
    const files = backlog();
    const ws = workspace(
      { handler, concurrency: 4 }, // retry: the defaults users get (maxAttempts 5, 30 s backoff)
      files,
    );
    let kills = 0;
    for (let round = 0; round < 6; round++) {
      const run = spawnCli(['run', '-c', ws.configPath]);
      await run.waitFor((l) => l.msg === 'run started');
      // A random kill point, reached through readiness: the Nth completed item (0 = at once).
      const n = Math.floor(Math.random() * 40);
      let seen = 0;
      if (n > 0) await run.waitFor((l) => l.msg === 'item done' && ++seen >= n, 30_000).catch(() => undefined);
      run.child.kill('SIGKILL');
      const { signal, code } = await run.exited;
      if (signal === 'SIGKILL') kills++;
      else expect(code).toBe(0); // it finished before the kill landed
    }
    expect(kills, 'most rounds must really be killed mid-run').toBeGreaterThanOrEqual(3);
    const clean = await runCli(['run', '-c', ws.configPath]);
    expect(clean.code, clean.stderr).toBe(0);
    expect(finished(clean)?.outcome).toBe('completed');

    const report = await statusJson(ws.configPath);
    expect(report.items).toEqual({ pending: 0, claimed: 0, done: ITEMS, dead: 0 });
    expectWholeOutputs(ws, files);

    const ledger = await openSqliteLedger(ws.db);
    try {
      for (const id of Object.keys(files)) {
        const rec = await ledger.get(id);
        expect(rec?.state).toBe('done');
        expect(rec!.attempts, `attempts of ${id} after ${kills} kills`).toBeLessThanOrEqual(kills + 1);
        expect(rec!.attempts).toBeGreaterThanOrEqual(1);
      }
    } finally {
      await ledger.close();
    }
  }, 180_000);
});
