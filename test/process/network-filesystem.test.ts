import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, configure, finished, spawnCliRaw, workspace, type Workspace } from '../helpers/cli.js';

/**
 * The run lock and the SQLite ledger on real mounts, made in a private mount namespace
 * (`unshare -m`) so that nothing leaks into the machine's mount table: a tmpfs (local, must
 * be accepted) and a FUSE file system (fuse-overlayfs, .ci/setup-apt.sh installs it),
 * which must be refused with exit 78 unless the config opts in.
 */

const probeDir = mkdtempSync(path.join(tmpdir(), 'cronsafe-mount-probe-'));
afterAll(() => rmSync(probeDir, { recursive: true, force: true }));

/** Why a mount of this kind cannot be made here, or null when it can. */
function cannotMount(script: string): string | null {
  const r = spawnSync('unshare', ['-m', 'sh', '-ec', script, 'sh', probeDir], { encoding: 'utf8', timeout: 20_000 });
  if (r.error) return r.error.message;
  return r.status === 0 ? null : (r.stderr.trim() || `exit ${r.status}`);
}

const TMPFS = 'mount -t tmpfs cronsafe-test "$1"';
const FUSE = [
  'mkdir -p "$1/.lower" "$1/.upper" "$1/.work" "$1/m"',
  'fuse-overlayfs -o "lowerdir=$1/.lower,upperdir=$1/.upper,workdir=$1/.work" "$1/m"',
  'test "$(stat -f -c %t "$1/m")" = 65735546',
  'fusermount -u "$1/m"',
].join('\n');

const noTmpfs = cannotMount(TMPFS);
const noFuse = cannotMount(FUSE);

/** Run the CLI with `ws.state` (lock and ledger) on a fresh mount of the given kind. */
async function onMount(kind: 'tmpfs' | 'fuse' | 'dead-fuse', ws: Workspace, args: string[]) {
  const overlay = 'mkdir -p "$STATE.lower" "$STATE.upper" "$STATE.work" && fuse-overlayfs -o "lowerdir=$STATE.lower,upperdir=$STATE.upper,workdir=$STATE.work"';
  const mount =
    kind === 'tmpfs'
      ? 'mount -t tmpfs cronsafe-test "$STATE"'
      : kind === 'fuse'
        ? // Upper dir beside the mount point: the ledger outlives each run, as on a real volume.
          `${overlay} "$STATE"`
        : // Its daemon in the foreground, then killed: the mount stays, and every call on it
          // fails with ENOTCONN (what a crashed sshfs or s3fs leaves). Until the mount shows
          // (statfs says FUSE), the kill would come before it.
          `${overlay} -f "$STATE" 2>/dev/null & pid=$!\nuntil [ "$(stat -f -c %t "$STATE")" = 65735546 ]; do kill -0 $pid; sleep 0.1; done\nkill -9 $pid; wait $pid || true`;
  const unmount = kind === 'fuse' ? 'fusermount -u "$STATE"\n' : kind === 'dead-fuse' ? 'umount -l "$STATE"\n' : '';
  // `&& ||`: under `sh -e` a refused run (exit 78) would end the script before the unmount,
  // and leave the fuse-overlayfs daemon running after the test.
  const script = `${mount}\n"$NODE" "$CLI" "$@" && rc=0 || rc=$?\n${unmount}exit $rc`;
  mkdirSync(ws.state, { recursive: true });
  const r = spawnCliRaw('unshare', ['-m', 'sh', '-ec', script, 'sh', ...args], {
    env: { STATE: ws.state, NODE: process.execPath, CLI },
    timeoutMs: 60_000,
  });
  const { code } = await r.exited;
  return { code, lines: r.lines, stdout: r.stdout(), stderr: r.stderr() };
}

const files = { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' };
const copy = { handler: { command: ['cp', '{path}', '{output}'] } };

describe('the run lock and SQLite ledger on a real local mount (tmpfs)', () => {
  it.skipIf(noTmpfs !== null)(`are accepted: validate names tmpfs and the run completes${noTmpfs ? ` (skipped: cannot mount a tmpfs here: ${noTmpfs})` : ''}`, async () => {
    const ws = workspace(copy, files);
    const v = await onMount('tmpfs', ws, ['validate', '-c', ws.configPath]);
    expect(v.code, v.stderr).toBe(0);
    expect(v.stdout.split('\n')[0]).toBe(`${ws.configPath}: OK (lock.path on tmpfs, state.sqlite on tmpfs)`);
    const summary = JSON.parse(v.stdout.slice(v.stdout.indexOf('\n') + 1)) as { filesystems: unknown[] };
    expect(summary.filesystems).toEqual([
      { key: 'lock.path', path: path.join(ws.state, 'cronsafe.lock'), type: 'tmpfs', network: false },
      { key: 'state.sqlite', path: ws.db, type: 'tmpfs', network: false },
    ]);

    const r = await onMount('tmpfs', ws, ['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)?.outcome).toBe('completed');
    expect(r.lines.filter((l) => l.level === 'warn')).toEqual([]);
    expect(readdirSync(ws.out).filter((f) => f.endsWith('.out')).sort()).toEqual(['a.txt.out', 'b.txt.out', 'c.txt.out']);
  });
});

describe('the run lock and SQLite ledger on a FUSE file system', () => {
  const reason = noFuse ? ` (skipped: cannot mount a FUSE file system here: ${noFuse})` : '';

  it.skipIf(noFuse !== null)(`are refused with exit 78, by run, daemon and validate alike, and nothing is touched${reason}`, async () => {
    const ws = workspace({ ...copy, schedule: { cron: '* * * * *' } }, files);
    for (const command of ['run', 'daemon', 'validate']) {
      const r = await onMount('fuse', ws, [command, '-c', ws.configPath]);
      expect(r.code, `${command}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(`lock.path: ${path.join(ws.state, 'cronsafe.lock')} is on a FUSE file system`);
      expect(r.stderr).toContain(`state.sqlite: ${ws.db} is on a FUSE file system`);
      expect(r.stderr).toContain('lock.allowNetworkFilesystem: true');
    }
    // Refused before the lock or the ledger was made, and before any handler ran.
    expect(readdirSync(`${ws.state}.upper`)).toEqual([]);
    expect(existsSync(ws.out)).toBe(false);
  });

  it.skipIf(noFuse !== null)(`run there when both opt-ins are set, with a warning on every run${reason}`, async () => {
    const ws = workspace(copy, files);
    configure(ws, {
      lock: { path: path.join(ws.state, 'cronsafe.lock'), allowNetworkFilesystem: true },
      state: { sqlite: ws.db, allowNetworkFilesystem: true },
    });
    const v = await onMount('fuse', ws, ['validate', '-c', ws.configPath]);
    expect(v.code, v.stderr).toBe(0);
    expect(v.stdout.split('\n')[0]).toBe(`${ws.configPath}: OK (lock.path on fuse (network, allowed), state.sqlite on fuse (network, allowed))`);

    for (const pass of [1, 2]) {
      const r = await onMount('fuse', ws, ['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(0);
      const warned = r.lines.filter((l) => typeof l.msg === 'string' && l.msg.includes('is on a FUSE file system'));
      expect(warned.map((l) => l.key), `pass ${pass}`).toEqual(['lock.path', 'state.sqlite']);
      expect(finished(r)?.outcome).toBe('completed');
    }
    expect(readdirSync(ws.out).filter((f) => f.endsWith('.out')).sort()).toEqual(['a.txt.out', 'b.txt.out', 'c.txt.out']);
    expect(readdirSync(`${ws.state}.upper`)).toContain('cronsafe.db');
  });
});

describe('the run lock and SQLite ledger on a FUSE file system whose daemon died (ENOTCONN)', () => {
  const reason = noFuse ? ` (skipped: cannot mount a FUSE file system here: ${noFuse})` : '';

  it.skipIf(noFuse !== null)(`are refused with exit 78 naming the dead mount, by validate and run alike (validate said OK, run blamed the lock file)${reason}`, async () => {
    const ws = workspace(copy, files);
    // The lock on the local disk: only the ledger is on the dead mount.
    configure(ws, { lock: { path: path.join(ws.dir, 'job.lock') }, state: { sqlite: ws.db } });
    for (const command of ['validate', 'run']) {
      const r = await onMount('dead-fuse', ws, [command, '-c', ws.configPath]);
      expect(r.code, `${command}: ${r.stdout}${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(`state.sqlite: ${ws.db} is on a FUSE file system that is not connected (ENOTCONN: its daemon is gone)`);
      expect(r.stderr).not.toContain('cannot take the run lock');
    }
    expect(existsSync(ws.out)).toBe(false);
  });

  it.skipIf(noFuse !== null)(`with the opt-in, exit 1 saying the mount is dead, not a run lock failure${reason}`, async () => {
    const ws = workspace(copy, files);
    configure(ws, { lock: { path: path.join(ws.dir, 'job.lock') }, state: { sqlite: ws.db, allowNetworkFilesystem: true } });
    for (const command of ['validate', 'run']) {
      const r = await onMount('dead-fuse', ws, [command, '-c', ws.configPath]);
      expect(r.code, `${command}: ${r.stdout}${r.stderr}`).toBe(1);
      expect(r.stderr).toContain(`state.sqlite: ${ws.db} is on a FUSE file system that is not connected (ENOTCONN: its daemon is gone): mount it again`);
      expect(r.stderr).not.toContain('cannot take the run lock');
    }
  });
});
