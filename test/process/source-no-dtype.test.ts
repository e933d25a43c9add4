import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { finished, runCli, statusJson, workspace } from '../helpers/cli.js';

/**
 * source.directory on a file system whose listings give no entry types (ext4 made with
 * `-O ^filetype` on a loop device; XFS with ftype=0, NFSv3 and many FUSE file systems are
 * alike): Node lstat()s each listed entry inside its read of the directory, and a file
 * removed or renamed by a producer between the listing and that read failed the whole
 * scan (`ENOENT ... lstat`, exit 1) at every run that met one. Needs root and loop devices.
 */

const isRoot = process.getuid?.() === 0;
const skipped = isRoot ? '' : ' (skipped: needs root to mount an ext4 image on a loop device)';

describe('a source on a file system without entry types', () => {
  it.skipIf(!isRoot)(`files removed mid-scan: the pass completes, every other file done once, the scan complete${skipped}`, async (ctx) => {
    const ws = workspace({ concurrency: 2, queueSize: 1 });
    const image = path.join(ws.dir, 'source.img');
    const made = [
      ['truncate', '-s', '16M', image],
      ['mkfs.ext4', '-q', '-F', '-N', '4096', '-O', '^filetype', image],
      ['mount', '-o', 'loop', image, ws.source],
    ].map(([cmd, ...args]) => spawnSync(cmd!, args, { encoding: 'utf8', timeout: 30_000 }));
    const failed = made.find((r) => r.status !== 0);
    if (failed) {
      if (made[2]!.status === 0) spawnSync('umount', ['-l', ws.source]);
      ctx.skip(`cannot mount an ext4 image without filetype on a loop device: ${failed.stderr}`);
    }
    try {
      const names = Array.from({ length: 600 }, (_, i) => `f${String(i).padStart(5, '0')}.txt`);
      for (const n of names) writeFileSync(path.join(ws.source, n), n);
      // The first attempt (the scan has given the first discovery batch, 256 files, and
      // waits on the queue) removes every file whose number ends in 3, as a producer
      // taking its files back would: the rest were listed already, not yet read by Node.
      const marker = path.join(ws.dir, 'removed');
      const script = `cat "$1" > "$2"; if mkdir ${JSON.stringify(marker)} 2>/dev/null; then rm -f ${JSON.stringify(ws.source)}/f*3.txt; fi`;
      const config = readFileSync(ws.configPath, 'utf8');
      writeFileSync(ws.configPath, `${config}handler:\n  command: ${JSON.stringify(['/bin/sh', '-c', script, 'sh', '{path}', '{output}'])}\n`);
      const r = await runCli(['run', '-c', ws.configPath], { timeoutMs: 60_000 });
      expect(r.code, r.stderr).toBe(0);
      expect(existsSync(marker)).toBe(true);
      expect(finished(r)).toMatchObject({ outcome: 'completed', scan: 'complete' });
      const stayed = names.filter((n) => !n.endsWith('3.txt'));
      for (const n of stayed) expect(readFileSync(path.join(ws.out, `${n}.out`), 'utf8')).toBe(n);
      const items = (await statusJson(ws.configPath)).items;
      expect(items).toMatchObject({ pending: 0, claimed: 0, dead: 0 });
      // Each done once; a removed file found before it went is claimed and forgotten (gone).
      const done = items.done ?? 0;
      expect(done).toBeGreaterThanOrEqual(stayed.length);
      const counts = finished(r)?.counts as Record<string, number>;
      expect(counts).toMatchObject({ succeeded: done, failed: 0, claimed: done + (counts.gone ?? 0) });
    } finally {
      spawnSync('umount', ['-l', ws.source]);
    }
  }, 120_000);
});
