// Micro-benchmark of the output store's per-item path (issue 13): a temp name for an
// attempt, then commit() of an attempt that wrote nothing (the no-op handler's hot path),
// and commit() of a small output (rename + two fsyncs). Run after `npm run build`:
//   node bench/output-commit.mjs [items]
// Since per-attempt directories (2026-12-06, load ~23, CPU time, 50,000 items): a command handler
// (always given {output}: its pooled directory, reused)
// 14.4 us/item against 9.6 us before (an lstat as its directory is handed out, one as it is
// released); a module handler that never reads outputPath 6.9 us (no
// lstat of a path it never had). A mkdir + rmdir per attempt instead cost ~130 us of CPU on ext4.
// Measured 2026-11-30 on the 2-core dev machine (load ~3), 100,000 items:
//   name + commit, nothing written: 6.0 us/item (before: sha1 + randomBytes per name and
//   a thrown ENOENT from fs.promises.lstat: 39.6 us/item); the miss itself, lstatSync
//   without throwing: 1.2 us (a thrown one: 28 us). Durable commits are unchanged.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { OutputStore } = await import(path.join(root, 'dist/runner/output.js'));
const N = Number(process.argv[2] ?? 100_000);
const out = mkdtempSync(path.join(tmpdir(), 'cronsafe-bench-out-'));
const store = new OutputStore(out);
await store.prepare();

async function time(name, n, fn) {
  for (let i = 0; i < Math.min(2000, n); i++) await fn(`warm${i}`);
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await fn(`id${i}`);
  const us = Number(process.hrtime.bigint() - t) / 1000 / n;
  console.log(`${name.padEnd(40)} ${us.toFixed(2)} us/item  (${n} items)`);
}
// A module handler that never reads its outputPath: its attempt's directory is never made.
await time('temp name + commit, nothing written', N, (id) => store.commit(store.tempPathFor(id, 1), id, undefined, undefined, false));
// A command handler (always given {output}): its attempt's directory made, then removed.
await time('same, path given (attempt directory)', N, (id) => {
  const tmp = store.tempPathFor(id, 1);
  store.makeAttemptDir(tmp);
  return store.commit(tmp, id);
});
await time('temp name + commit of 16 bytes (fsync)', Math.min(N, 2000), async (id) => {
  const tmp = store.tempPathFor(id, 1);
  store.makeAttemptDir(tmp);
  writeFileSync(tmp, 'sixteen bytes..\n');
  await store.commit(tmp, `w/${id}`);
});
rmSync(out, { recursive: true, force: true });
