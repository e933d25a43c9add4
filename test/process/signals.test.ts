import { writeFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, FIXTURES, finished, spawnCli, spawnCliRaw, statusJson, workspace } from '../helpers/cli.js';
import { filesIn, until } from '../helpers/wait.js';
import { processTree } from '../helpers/proc.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';

const slow = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];
const items = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`slow-${i}.scc`, `item ${i}`]));
const GATE = path.join(FIXTURES, 'process/gate-register.mjs');

/**
 * Start the CLI held at the first module it imports (test/fixtures/process/gate-*.mjs):
 * the moment a signal used to find no handler. `open()` lets the start-up go on.
 */
async function gatedCli(args: string[], dir: string, env: NodeJS.ProcessEnv = {}) {
  const gate = path.join(dir, 'gate');
  const { mkdirSync } = await import('node:fs');
  mkdirSync(gate, { recursive: true });
  const cli = spawnCliRaw(process.execPath, ['--import', GATE, CLI, ...args], { env: { ...env, GATE_DIR: gate } });
  await until(() => existsSync(path.join(gate, 'waiting')), 'the CLI to reach its start-up gate');
  return { ...cli, open: () => writeFileSync(path.join(gate, 'open'), '') };
}

describe('signals during start-up', () => {
  for (const sig of ['SIGTERM', 'SIGHUP', 'SIGINT', 'SIGALRM'] as const) {
    it(`a ${sig} before the run started drains it (exit 75, nothing started, nothing claimed), never a raw ${{ SIGHUP: 129, SIGINT: 130, SIGTERM: 143, SIGALRM: 142 }[sig]}`, async () => {
      const ws = workspace({ handler: { command: slow }, concurrency: 2 }, items(3));
      const markers = path.join(ws.dir, 'markers');
      const run = await gatedCli(['run', '-c', ws.configPath], ws.dir, { MARKER_DIR: markers, SLOW_MS: '60000' });
      run.child.kill(sig);
      run.open();
      const { code, signal } = await run.exited;
      expect(signal, run.stderr()).toBeNull();
      expect([0, 75], run.stderr()).toContain(code);
      expect(filesIn(markers), 'no handler started').toEqual([]);
      expect((await statusJson(ws.configPath)).items).toMatchObject({ claimed: 0, done: 0, dead: 0 });
    });
  }

  it('a signal before `status` started ends it promptly with 128 + n', async () => {
    const ws = workspace({});
    const status = await gatedCli(['status', '-c', ws.configPath], ws.dir);
    status.child.kill('SIGTERM');
    status.open();
    const { code, signal } = await status.exited;
    // 143 either way to a shell: by process.exit(143), or killed by the signal itself.
    expect(code === 143 || signal === 'SIGTERM', `${code} ${signal}`).toBe(true);
    expect(status.stdout()).toBe('');
  });

  it('a signal before `daemon` started stops it cleanly (exit 0) without running a pass', async () => {
    const ws = workspace({ handler: { command: slow }, schedule: { cron: '* * * * *' } }, items(1));
    const markers = path.join(ws.dir, 'markers');
    const daemon = await gatedCli(['daemon', '-c', ws.configPath], ws.dir, { MARKER_DIR: markers });
    daemon.child.kill('SIGHUP');
    daemon.open();
    const { code, signal } = await daemon.exited;
    expect(signal, daemon.stderr()).toBeNull();
    expect(code, daemon.stderr()).toBe(0);
    expect(filesIn(markers)).toEqual([]);
  });
});

describe('SIGHUP', () => {
  it('drains a run like SIGTERM: in-flight items handed back uncharged, exit 75', async () => {
    const ws = workspace({ handler: { command: slow }, concurrency: 1, drain: { gracePeriodSeconds: 4, marginSeconds: 1 } }, items(2));
    const markers = path.join(ws.dir, 'markers');
    const run = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '120000' } });
    await until(() => filesIn(markers).length === 1, 'a handler to start');
    run.child.kill('SIGHUP');
    const { code, signal } = await run.exited;
    expect(signal, run.stderr()).toBeNull();
    expect(code, run.stderr()).toBe(75);
    expect(finished({ lines: run.lines })?.outcome).toBe('drained');
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 2, claimed: 0, done: 0, dead: 0 });
  });
});

// SIGQUIT / SIGUSR2 end the process at once, as a crash does, saying so on stderr. During a
// drain the stop is already in the ledger, and the next run hands back uncharged what the
// drain had not: "the attempts running are charged" would be untrue then.
describe('SIGUSR2 during a drain', () => {
  it('ends the run at once (the signal) and says the next run hands the attempts back uncharged', async () => {
    const ws = workspace({ handler: { command: slow }, concurrency: 2 }, items(2));
    const markers = path.join(ws.dir, 'markers');
    const run = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '120000' }, cwd: ws.dir });
    await until(() => filesIn(markers).length === 2, 'two handlers to start');
    run.child.kill('SIGTERM');
    await run.waitFor((l) => String(l.msg).startsWith('stop recorded in the ledger'));
    const tree = processTree(run.child.pid!);
    run.child.kill('SIGUSR2');
    const { signal } = await run.exited;
    expect(signal, run.stderr()).toBe('SIGUSR2');
    expect(run.stderr()).toContain('cronsafe: SIGUSR2: ending at once (the drain is cut short, as by a kill: the next run hands back uncharged the attempts it had not)\n');
    // The helper ends its children with cronsafe; any left are not the test's to keep.
    for (const pid of tree.slice(1)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone already */
      }
    }
  });
});

describe('SIGTERM to every process of the run at once', () => {
  // systemd's default KillMode=control-group (a timer's service stopped, a shutdown) signals
  // the whole cgroup: cronsafe, the helpers that fork handler.command children, and the
  // handlers. It is one stop, as the kubelet's SIGTERM to cronsafe alone is: a drain, exit 75,
  // and the handlers it killed are not charged.
  // A handler that answers SIGTERM with exit 143 (128 + 15) rather than dying of it, as a JVM
  // or a script's `trap 'exit 143' TERM` does, was stopped by the same signal: charged before.
  const exits143 = [process.execPath, path.join(FIXTURES, 'process/term-exit-exec.mjs'), '{path}', '{output}'];
  // SIGALRM (`timeout -s ALRM` signals its child's process group) is a stop as SIGTERM is: it
  // ended cronsafe and its helpers at once (exit 142), its handlers' attempts charged.
  for (const [how, command, sig] of [
    ['killed by it', slow, 'SIGTERM'],
    ['that exit 143 on it', exits143, 'SIGTERM'],
    ['killed by it, for SIGALRM', slow, 'SIGALRM'],
  ] as const) {
  it(`drains the run (exit 75): the helpers live on, the handlers ${how} are handed back uncharged`, async () => {
    const ws = workspace({ handler: { command }, concurrency: 2 }, items(3));
    const markers = path.join(ws.dir, 'markers');
    const run = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '120000' } });
    await until(() => filesIn(markers).length === 2, 'two handlers to start');
    for (const pid of processTree(run.child.pid!)) {
      try {
        process.kill(pid, sig);
      } catch {
        /* gone already */
      }
    }
    const { code, signal } = await run.exited;
    expect(signal, run.stderr()).toBeNull();
    expect(code, run.stderr()).toBe(75);
    expect(finished({ lines: run.lines })?.outcome).toBe('drained');
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 3, claimed: 0, done: 0, dead: 0 });
    const ledger = await openSqliteLedger(ws.db);
    try {
      for (const id of Object.keys(items(3))) {
        const rec = await ledger.get(id);
        expect(rec && rec.attempts - rec.released, id).toBe(0);
      }
    } finally {
      await ledger.close();
    }
  });
  }
});

describe("a handler's own SIGALRM during a SIGTERM drain", () => {
  // SIGALRM stops a run as SIGTERM does, and a handler that died of the stop's signal in the
  // drain is handed back uncharged. A handler's own alarm() (its watchdog) that fires in a drain
  // begun by SIGTERM is no stop of cronsafe's: it failed on its own, charged, as outside a drain.
  it('is charged: it is not the signal that stopped the run', async () => {
    const ws = workspace({ handler: { command: ['sh', '-c', 'touch "$MARKER_DIR/started"; while [ ! -e "$MARKER_DIR/go" ]; do sleep 0.05; done; kill -ALRM $$'] } }, { 'a.txt': 'a' });
    const markers = path.join(ws.dir, 'markers');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(markers, { recursive: true });
    const run = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers } });
    await until(() => filesIn(markers).includes('started'), 'the handler to start');
    run.child.kill('SIGTERM');
    await run.waitFor((l) => String(l.msg).startsWith('drain: stopped claiming'));
    writeFileSync(path.join(markers, 'go'), '');
    const { code } = await run.exited;
    // Nothing was left to hand back: the pass ended as it would have (0), its item to retry.
    expect([0, 75], run.stderr()).toContain(code);
    const ledger = await openSqliteLedger(ws.db);
    try {
      const rec = await ledger.get('a.txt');
      expect(rec?.lastError).toContain('killed by SIGALRM');
      expect(rec && rec.attempts - rec.released, 'charged').toBe(1);
    } finally {
      await ledger.close();
    }
  });
});
