// Command handlers: `cronsafe run` with `handler.command: ["true"]` over N empty files,
// against a bare Node loop that spawns `true` N times with the same concurrency
// (bench/fixtures/spawn-loop.mjs). Both are timed from spawn to exit, Node start-up
// included. The ratio is what cronsafe's own work (ledger, process groups, output
// capture, timeouts) costs on top of process creation (docs/benchmarks.md).
// The three runners take turns, BENCH_CMD_ROUNDS rounds (default 3): on a shared machine
// the load drifts between minutes, so each round's ratios are taken within the round and
// the median round's are reported.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BENCH_DIR, makeFlatTree, median, which } from './lib.mjs';
import { cliRun } from './compare.mjs';
import { run } from './rss.mjs';

async function spawnLoop(truePath, items, concurrency, capture) {
  const argv = [process.execPath, path.join(BENCH_DIR, 'fixtures', 'spawn-loop.mjs'), truePath, String(items), String(concurrency), ...(capture ? ['--capture'] : [])];
  const t0 = performance.now();
  const r = await run(argv, 60_000 + items * 20);
  const wallMs = performance.now() - t0;
  if (r.code !== 0 || !r.stdout.includes(`spawned ${items}`)) throw new Error(`spawn loop${capture ? ' with capture' : ''} failed (${r.code}): ${r.stderr}`);
  return { items, wallMs, itemsPerSec: (items * 1000) / wallMs };
}

export async function measureCommand({ items, concurrency = 8, rounds = Number(process.env.BENCH_CMD_ROUNDS ?? 3), log }) {
  const root = mkdtempSync(path.join(os.tmpdir(), 'cronsafe-bench-cmd-'));
  const truePath = which('/usr/bin/true', '/bin/true') ?? 'true';
  try {
    const queue = path.join(root, 'queue');
    makeFlatTree(queue, items);
    const all = [];
    for (let i = 0; i < rounds; i++) {
      log(`command: round ${i + 1}/${rounds}, ${items} items, handler.command ["true"], concurrency ${concurrency} ...`);
      const cli = await cliRun(root, queue, items, { command: ['true'], name: `cli-${i}` });
      // The bare loop: the baseline. The same loop with what a command handler cannot drop
      // (its own process group, stdout and stderr piped): where Node's own cost ends.
      const bare = await spawnLoop(truePath, items, concurrency, false);
      const capture = await spawnLoop(truePath, items, concurrency, true);
      const round = { cronsafe: cli, bare, capture, ratio: cli.itemsPerSec / bare.itemsPerSec, ratioCapture: cli.itemsPerSec / capture.itemsPerSec, load: os.loadavg()[0] };
      log(`command: cronsafe ${Math.round(cli.itemsPerSec)}/s, bare ${Math.round(bare.itemsPerSec)}/s, capture ${Math.round(capture.itemsPerSec)}/s: ${round.ratio.toFixed(2)}x / ${round.ratioCapture.toFixed(2)}x, load ${round.load.toFixed(1)}`);
      all.push(round);
    }
    const ratio = median(all.map((r) => r.ratio));
    const mid = all.find((r) => r.ratio === ratio) ?? all[0];
    return { items, concurrency, rounds: all, cronsafe: mid.cronsafe, bare: mid.bare, capture: mid.capture, ratio, ratioCapture: median(all.map((r) => r.ratioCapture)) };
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
