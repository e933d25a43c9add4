/**
 * `state.sqlite` a symbolic link to the ledger file, and another config of the same job
 * naming the file itself (each with its own lock.path: the chart's per-pod /tmp). Both paths
 * are one ledger: SQLite keeps its -wal and -shm beside the real file, and so must every
 * part of the one-run-at-a-time lock, the name lock included, which is what still holds when
 * the state directory is removed under a run (name-lock.ts).
 */
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync, writeSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { FIXTURES, finished, runCli, spawnCli, workspace, type Running } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

const slow = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

/** Another config of the same job beside the workspace's, naming `sqlite` and its own lock.path. */
function secondConfig(configPath: string, name: string, sqlite: string, lock: string): string {
  const config = YAML.parse(readFileSync(configPath, 'utf8')) as Record<string, unknown>;
  const file = path.join(path.dirname(configPath), name);
  writeFileSync(file, YAML.stringify({ ...config, state: { sqlite }, lock: { path: lock } }));
  return file;
}

function killHandlers(markers: string): void {
  for (const f of existsSync(markers) ? readdirSync(markers) : []) {
    try {
      process.kill(Number(f.replace('.started', '')), 'SIGKILL');
    } catch {
      /* gone */
    }
  }
}

describe('a ledger named through a symbolic link by one config and by its real path by another', () => {
  it('SQLite keeps -wal and -shm beside the real file; a start of the other config skips, also once the state directory is removed under a paused run', async () => {
    const ws = workspace({ handler: { command: slow, timeoutSeconds: 600 }, concurrency: 1 }, { 'a.txt': 'a' });
    const real = path.join(ws.dir, 'real-state', 'job.db');
    mkdirSync(path.dirname(real));
    const linkDir = path.join(ws.dir, 'link-state');
    mkdirSync(linkDir);
    const link = path.join(linkDir, 'ledger.db');
    symlinkSync(real, link);
    const viaLink = secondConfig(ws.configPath, 'via-link.yaml', link, path.join(linkDir, 'job.lock'));
    const direct = secondConfig(ws.configPath, 'direct.yaml', real, path.join(ws.dir, 'direct.lock'));
    const markers = path.join(ws.dir, 'markers');
    const gate = path.join(ws.dir, 'gate');
    const a: Running = spawnCli(['run', '-c', viaLink], { env: { MARKER_DIR: markers, GATE: gate } });
    cleanups.push(() => {
      a.child.kill('SIGKILL');
      killHandlers(markers);
    });
    await until(() => existsSync(markers) && readdirSync(markers).length > 0, 'the handler of the run through the link to start');
    // SQLite's files beside the real file, none beside the link.
    expect(existsSync(`${real}-wal`)).toBe(true);
    expect(existsSync(`${link}-wal`) || existsSync(`${link}-shm`)).toBe(false);
    // The other path to the same ledger: skipped while the run holds it.
    const b = spawnCli(['run', '-c', direct], { env: { GATE: ws.dir } });
    expect((await b.exited).code, `before the pause: ${b.stderr()}`).toBe(0);
    expect(finished(b)?.outcome, b.stdout()).toBe('skipped-locked');
    // The run paused (before its recheck sees anything), its state directory removed: only
    // the name lock still stands between it and a start on the real path.
    a.child.kill('SIGSTOP');
    rmSync(path.dirname(real), { recursive: true, force: true });
    const c = spawnCli(['run', '-c', direct], { env: { GATE: ws.dir } });
    expect((await c.exited).code, c.stderr()).toBe(0);
    expect(finished(c)?.outcome, c.stdout()).toBe('skipped-locked');
    expect(c.lines.some((l) => l.msg.startsWith('another run of this ledger holds its name lock')), c.stdout()).toBe(true);
    a.child.kill('SIGCONT');
  }, 60_000);

  it('a damaged ledger through the link: the advice names the real file, beside which its -wal and -shm are', async () => {
    const ws = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'a' });
    const real = path.join(ws.dir, 'real-state', 'job.db');
    mkdirSync(path.dirname(real));
    const link = path.join(ws.dir, 'link-state', 'ledger.db');
    mkdirSync(path.dirname(link));
    symlinkSync(real, link);
    const viaLink = secondConfig(ws.configPath, 'via-link.yaml', link, path.join(ws.dir, 'link-state', 'job.lock'));
    const first = await runCli(['run', '-c', viaLink]);
    expect(first.code, first.stderr).toBe(0);
    const fd = openSync(real, 'r+');
    writeSync(fd, Buffer.from('not a header....\0\0\0\0'), 0, 20, 0);
    closeSync(fd);
    for (const args of [['run'], ['status']]) {
      const r = await runCli([...args, '-c', viaLink]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(`the ledger file ${realpathSync(real)} is damaged: stop the job, then restore it from a backup (removing any ${realpathSync(real)}-wal and -shm beside it`);
    }
  }, 60_000);
});
