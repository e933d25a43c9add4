/**
 * The init container's command, exactly as the chart renders it, run as the pod's user
 * (uid/gid 65532, no supplementary groups) on a "volume" that ignores fsGroup: a
 * root-owned directory. It must exit 78 (the podFailurePolicy's FailJob code) and say
 * which path, its owner and mode, the uid it runs as, and the fixes; on a writable
 * volume it creates every directory and exits 0.
 *
 * Needs root, to run the command as another user with setpriv (CI runs as root).
 */
import { spawnSync } from 'node:child_process';
import { chownSync, chmodSync, existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureTools, podSpec, render, runner, tempDir, type Obj } from './helpers.js';

beforeAll(ensureTools);

const UID = 65532;
const canSwitchUser = process.getuid?.() === 0 && spawnSync('sh', ['-c', 'command -v setpriv']).status === 0;

/** The rendered init container's argv, for a volume mounted at `mountPath`. */
function initCommand(mountPath: string, values: Obj = {}): string[] {
  const init = (podSpec(runner(render({ persistence: { mountPath }, ...values }))).initContainers as Obj[])[0];
  return init?.command as string[];
}

function runAsPodUser(argv: string[]) {
  const r = spawnSync('setpriv', ['--reuid', String(UID), '--regid', String(UID), '--clear-groups', ...argv],
    { encoding: 'utf8', timeout: 30_000, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
  if (r.error) throw r.error;
  return r;
}

describe.skipIf(!canSwitchUser)('init-dirs on the pod user (needs root and setpriv)', () => {
  it('on a root-owned volume: exits 78 naming the path, owner, mode, uid and the fixes', () => {
    const vol = path.join(tempDir('cronsafe-initdirs-'), 'vol');
    mkdirSync(vol, { mode: 0o755 });
    chmodSync(vol, 0o755);
    chmodSync(path.dirname(vol), 0o755);
    const r = runAsPodUser(initCommand(vol));
    expect(r.status, r.stderr).toBe(78);
    expect(r.stderr).toContain(`cannot create or read the directory ${vol}/queue: ${vol} is owned by uid:gid 0:0 with mode 755`);
    expect(r.stderr).toContain(`this container runs as uid ${UID}, gid ${UID}`);
    expect(r.stderr).toContain('podSecurityContext.fsGroup');
    expect(r.stderr).toContain(`pre-create ${vol}/queue owned by (or readable for) uid ${UID}`);
    expect(r.stderr).toContain('initDirs.enabled: false');
    expect(existsSync(path.join(vol, 'queue'))).toBe(false);
  });

  it('a pre-created directory that is not writable is named itself', () => {
    const vol = path.join(tempDir('cronsafe-initdirs-'), 'vol');
    mkdirSync(path.join(vol, 'out'), { recursive: true });
    chmodSync(path.dirname(vol), 0o755);
    chownSync(vol, UID, UID);
    // The output directory exists (root-owned, 0755): readable, but cronsafe could not write there.
    chmodSync(path.join(vol, 'out'), 0o755);
    const r = runAsPodUser(initCommand(vol));
    expect(r.status, r.stderr).toBe(78);
    expect(r.stderr).toContain(`cannot create or write the directory ${vol}/out: ${vol}/out is owned by uid:gid 0:0 with mode 755`);
  });

  // cronsafe only reads the source (its own check wants read and search, nothing more): a
  // queue that a producer owns, on a volume that ignores fsGroup, is fine as it is.
  it('a source directory the pod user can read but not write passes; the others are created', () => {
    const vol = path.join(tempDir('cronsafe-initdirs-'), 'vol');
    mkdirSync(path.join(vol, 'queue'), { recursive: true });
    chmodSync(path.dirname(vol), 0o755);
    chownSync(vol, UID, UID);
    chmodSync(path.join(vol, 'queue'), 0o755); // root-owned
    const r = runAsPodUser(initCommand(vol));
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    for (const d of ['out', 'state']) expect(statSync(path.join(vol, d)).uid).toBe(UID);
  });

  it('a source directory the pod user cannot read or search: exits 78 naming it', () => {
    const vol = path.join(tempDir('cronsafe-initdirs-'), 'vol');
    mkdirSync(path.join(vol, 'queue'), { recursive: true });
    chmodSync(path.dirname(vol), 0o755);
    chownSync(vol, UID, UID);
    chmodSync(path.join(vol, 'queue'), 0o700); // root-owned, closed
    const r = runAsPodUser(initCommand(vol));
    expect(r.status, r.stderr).toBe(78);
    expect(r.stderr).toContain(`cannot create or read the directory ${vol}/queue: ${vol}/queue is owned by uid:gid 0:0 with mode 700`);
  });

  it('a file where a directory must be is named as such, not blamed on ownership', () => {
    const vol = path.join(tempDir('cronsafe-initdirs-'), 'vol');
    mkdirSync(vol, { recursive: true });
    chmodSync(path.dirname(vol), 0o755);
    chownSync(vol, UID, UID);
    writeFileSync(path.join(vol, 'out'), 'a file');
    const r = runAsPodUser(initCommand(vol));
    expect(r.status, r.stderr).toBe(78);
    expect(r.stderr).toContain(`cannot create the directory ${vol}/out: ${vol}/out exists and is not a directory`);
    expect(r.stderr).not.toContain('fsGroup');
  });

  it('on a volume the user can write (what fsGroup gives): creates source, output and state, exits 0', () => {
    const vol = path.join(tempDir('cronsafe-initdirs-'), 'vol');
    mkdirSync(vol);
    chmodSync(path.dirname(vol), 0o755);
    chownSync(vol, 0, UID);
    chmodSync(vol, 0o2775);
    const r = runAsPodUser(initCommand(vol, { config: { source: { directory: 'in/box' } } }));
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    for (const d of ['in/box', 'out', 'state']) {
      expect(statSync(path.join(vol, d)).uid).toBe(UID);
    }
    // Idempotent: the next Job's init container finds them in place.
    expect(runAsPodUser(initCommand(vol, { config: { source: { directory: 'in/box' } } })).status).toBe(0);
  });
});
