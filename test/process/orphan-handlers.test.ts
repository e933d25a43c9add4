/**
 * cronsafe killed alone (kill -9, the OOM killer picking it, off Kubernetes where no
 * container takes its children with it): the handler children it had started must not run
 * on. Nobody will record their attempts, and the next run charges them and starts the same
 * items again, so an orphan would run beside its own retry (one run at a time broken, twice
 * the side effects). Before, the helper that forks the children just exited, and the
 * children ran to their end as orphans.
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, runCli, spawnCli, statusJson, workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Alive and not a zombie: a killed orphan waits for PID 1 to reap it, which may take seconds. */
const running = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
};

describe('cronsafe killed alone, its handlers still running', () => {
  it('their process groups end with it; the next run charges and finishes the items', async () => {
    const ws = workspace({ concurrency: 2 }, { 'a.txt': 'a', 'b.txt': 'b' });
    const pids = path.join(ws.dir, 'pids');
    const script = path.join(ws.dir, 'slow.sh');
    // A child of the handler too (its group): `sleep` in the background, waited for.
    writeFileSync(script, `#!/bin/sh\nsleep 60 &\necho "$$ $!" >> "${pids}/$(basename "$1")"\nwait\n`, { mode: 0o755 });
    mkdirSync(pids);
    configure(ws, { handler: { command: [script, '{path}'] } });
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    await until(() => readdirSync(pids).length === 2 && readdirSync(pids).every((f) => readFileSync(path.join(pids, f), 'utf8').endsWith('\n')), 'both handlers started', 60_000);
    const started = readdirSync(pids).flatMap((f) => readFileSync(path.join(pids, f), 'utf8').trim().split(/\s+/).map(Number));
    expect(started).toHaveLength(4);
    expect(started.every(alive)).toBe(true);
    process.kill(run.child.pid!, 'SIGKILL'); // cronsafe alone, not its tree
    await run.exited;
    await until(() => !started.some(alive), 'the orphaned handlers and their children to end', 10_000);
    writeFileSync(script, '#!/bin/sh\nexit 0\n', { mode: 0o755 });
    const next = await runCli(['run', '-c', ws.configPath]);
    expect(next.code, next.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ done: 2, claimed: 0, dead: 0 });
  }, 120_000);

  it('so do the processes a handler left in its group, while cronsafe was still ending them', async () => {
    const ws = workspace({}, { 'a.txt': 'a' });
    const pids = path.join(ws.dir, 'pids');
    const script = path.join(ws.dir, 'leaves.sh');
    // Exits at once, leaving a child in its group that ignores SIGTERM: cronsafe ends it
    // (SIGKILL after killAfterSeconds, 5 s) before the attempt settles.
    writeFileSync(script, `#!/bin/sh\n(trap '' TERM; exec sleep 60) >/dev/null 2>&1 &\necho $! > "${pids}"\n`, { mode: 0o755 });
    configure(ws, { handler: { command: [script] } });
    const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    await run.waitFor((l) => l.msg.startsWith('handler exited but left processes in its group'));
    const leftover = Number(readFileSync(pids, 'utf8'));
    expect(running(leftover)).toBe(true);
    process.kill(run.child.pid!, 'SIGKILL'); // within the 5 s it gives the leftover
    await run.exited;
    await until(() => !running(leftover), 'the leftover to end with cronsafe', 10_000);
  }, 120_000);
});
