// Command handlers: `cronsafe run` with `handler.command: ["true"]` over N empty files,
// against a bare Node loop that spawns `true` N times with the same concurrency
// (bench/fixtures/spawn-loop.mjs). Both are timed from spawn to exit, Node start-up
// included. The ratio is what cronsafe's own work (ledger, process groups, output
// capture, timeouts) costs on top of process creation (docs/benchmarks.md).
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BENCH_DIR, makeFlatTree, which } from './lib.mjs';
import { cliRun } from './compare.mjs';
import { run } from './rss.mjs';

export async function measureCommand({ items, concurrency = 8, log }) {
  const root = mkdtempSync(path.join(os.tmpdir(), 'cronsafe-bench-cmd-'));
  const truePath = which('/usr/bin/true', '/bin/true') ?? 'true';
  try {
    const queue = path.join(root, 'queue');
    makeFlatTree(queue, items);
    log(`command: ${items} items, handler.command ["true"], concurrency ${concurrency} ...`);
    const cli = await cliRun(root, queue, items, { command: ['true'] });
    log(`command: cronsafe ${Math.round(cli.itemsPerSec)} items/s; bare spawn loop ...`);
    const t0 = performance.now();
    const loop = await run([process.execPath, path.join(BENCH_DIR, 'fixtures', 'spawn-loop.mjs'), truePath, String(items), String(concurrency)], 60_000 + items * 20);
    const wallMs = performance.now() - t0;
    if (loop.code !== 0 || !loop.stdout.includes(`spawned ${items}`)) throw new Error(`spawn loop failed (${loop.code}): ${loop.stderr}`);
    const bare = { items, wallMs, itemsPerSec: (items * 1000) / wallMs };
    log(`command: bare loop ${Math.round(bare.itemsPerSec)} spawns/s; with pipes and process groups ...`);
    // The same loop with what a command handler cannot drop (its own process group, stdout and
    // stderr piped): where Node's own cost ends and cronsafe's begins.
    const t1 = performance.now();
    const cap = await run([process.execPath, path.join(BENCH_DIR, 'fixtures', 'spawn-loop.mjs'), truePath, String(items), String(concurrency), '--capture'], 60_000 + items * 20);
    const capMs = performance.now() - t1;
    if (cap.code !== 0 || !cap.stdout.includes(`spawned ${items}`)) throw new Error(`spawn loop with capture failed (${cap.code}): ${cap.stderr}`);
    const capture = { items, wallMs: capMs, itemsPerSec: (items * 1000) / capMs };
    log(`command: bare loop with capture ${Math.round(capture.itemsPerSec)} spawns/s`);
    return { items, concurrency, cronsafe: cli, bare, capture, ratio: cli.itemsPerSec / bare.itemsPerSec, ratioCapture: cli.itemsPerSec / capture.itemsPerSec };
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
