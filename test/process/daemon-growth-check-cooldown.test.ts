import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, growthPassFinished, workspace } from '../helpers/cli.js';
import { LIBFAKETIME, spawnFastCli } from '../helpers/faketime.js';
import { until } from '../helpers/wait.js';

// An idle daemon with daemon.growth looked for new files at every tick (tickSeconds, 30 s)
// once a cooldown had passed since the last pass, not once per cooldown as docs/schedule.md
// says ("it costs at most one directory walk per cooldown"): a check that found nothing left
// the cooldown passed. Over a source of 1,000,000 done files each look is a walk of ~10 s of
// CPU, so such a daemon walked its source without pause between occurrences.

const DUE = 'daemon: occurrence due; starting a pass';

/** Counts the opens of `dir` (one per walk of it) with inotify, through test/fixtures/process/dir-opens.py. */
function watchOpens(dir: string) {
  const child = spawn('python3', [path.join(FIXTURES, 'process/dir-opens.py'), dir, '120'], { stdio: ['pipe', 'pipe', 'inherit'] });
  let ready = false;
  let opens = 0;
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    for (const line of chunk.split('\n')) {
      if (line === 'ready') ready = true;
      else if (/^\d+$/.test(line)) opens = Number(line);
    }
  });
  return { ready: () => ready, opens: () => opens, stop: () => child.stdin.end() };
}

describe.skipIf(LIBFAKETIME === undefined)('cronsafe daemon, growth check between occurrences', () => {
  it('looks at the source once per cooldownSeconds, not at every tick, and still starts a growth pass for a new file', async () => {
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'process/noop-module.mjs') },
        schedule: { cron: '*/15 * * * *', timeZone: 'UTC' },
        daemon: { tickSeconds: 30, growth: { enabled: true, cooldownSeconds: 300 } },
      },
      { 'a.txt': 'a' },
    );
    const watch = watchOpens(ws.source);
    try {
      await until(watch.ready, 'the inotify watch on the source', 10_000);
      // 60x: a tick every half second, a cooldown every 5 s, the next occurrence (12:15) 15 s away.
      const daemon = spawnFastCli(['daemon', '-c', ws.configPath], '2026-06-01 12:00:30', { timeoutMs: 90_000 });
      try {
        await daemon.waitFor((l) => l.msg === 'run finished', 30_000);
        const afterPass = watch.opens();
        let due = 0;
        await daemon.waitFor((l) => l.msg === DUE && ++due === 2, 45_000); // 12:15
        const between = watch.opens() - afterPass;
        // 12:00:30 to 12:15, idle, nothing new: looks at 12:05 and 12:10 (slack for the 12:15
        // pass's own scan, whose opens may be counted before its line is read), where every 30 s
        // tick from 12:05 on walked it (~20).
        expect(between, `the source was opened ${between} times while the daemon idled 14 minutes`).toBeLessThanOrEqual(5);
        await daemon.waitFor((l) => l.msg === 'run finished' && l !== daemon.lines.find((f) => f.msg === 'run finished'), 30_000);
        writeFileSync(path.join(ws.source, 'b.txt'), 'b');
        const growthPass = await growthPassFinished(daemon);
        expect(growthPass).toMatchObject({ outcome: 'completed', counts: { succeeded: 1 } });
      } finally {
        daemon.child.kill('SIGTERM');
      }
      expect((await daemon.exited).code, daemon.stderr()).toBe(0);
    } finally {
      watch.stop();
    }
  }, 120_000);
});
