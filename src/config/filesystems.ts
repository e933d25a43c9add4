/**
 * Which file system the run lock and the SQLite ledger live on, and a refusal when it is a
 * network or FUSE one: there a flock can be granted to two hosts at once (seed 000's NFS
 * warning), and SQLite's WAL needs memory shared between processes, which such a file
 * system cannot give, so the ledger can be corrupted. On Kubernetes this is the easy
 * mistake of a ReadWriteMany volume (NFS, CephFS, Azure Files, EFS) holding everything.
 *
 * The type is the statfs(2) magic number of the file (following links, as flock and SQLite
 * do) or, when it does not exist yet, of its nearest existing parent directory (where a
 * dangling link points, for a link: that is where it will be created).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from './types.js';
import { ConfigError, StateUnavailable } from '../errors.js';

/** f_type magic numbers (linux/magic.h and the file systems' own sources). */
const NETWORK: ReadonlyMap<number, string> = new Map([
  [0x6969, 'nfs'],
  [0x517b, 'smb'],
  [0xff534d42, 'cifs'],
  [0xfe534d42, 'smb2'],
  [0x00c36400, 'ceph'],
  [0x01021997, '9p'],
  [0x0bd00bd0, 'lustre'],
  // Every FUSE file system: GlusterFS's native client, s3fs, sshfs, blobfuse, JuiceFS...
  [0x65735546, 'fuse'],
  [0x5346414f, 'afs'],
  [0x6b414653, 'kafs'],
  [0x73757245, 'coda'],
  [0x564c, 'ncp'],
  [0x47504653, 'gpfs'],
  [0x19830326, 'beegfs'],
  [0x20030528, 'orangefs'],
  [0xaad7aaea, 'panfs'],
  [0x786f4256, 'vboxsf'],
]);

/** Local types, named only so that `validate` can say what it found. */
const LOCAL: ReadonlyMap<number, string> = new Map([
  [0xef53, 'ext4'], // ext2 and ext3 share the magic
  [0x58465342, 'xfs'],
  [0x9123683e, 'btrfs'],
  [0x01021994, 'tmpfs'],
  [0x794c7630, 'overlay'],
  [0x2fc12fc1, 'zfs'],
  [0xf2f52010, 'f2fs'],
  [0x858458f6, 'ramfs'],
  [0x73717368, 'squashfs'],
  [0x4d44, 'vfat'],
]);

/**
 * Kernel pseudo file systems: the kernel's own entries, where no file can be created (in a
 * cgroup file system a mkdir makes a cgroup). A path there can never hold what cronsafe writes.
 */
const PSEUDO: ReadonlyMap<number, string> = new Map([
  [0x9fa0, 'proc'],
  [0x62656572, 'sysfs'],
  [0x27e0eb, 'cgroup'],
  [0x63677270, 'cgroup2'],
  [0x1cd1, 'devpts'],
  [0x64626720, 'debugfs'],
  [0x74726163, 'tracefs'],
  [0x73636673, 'securityfs'],
]);

export type Statfs = (p: string) => { type: number };

/**
 * What statfs(2) fails with on a network or FUSE mount that is dead, and the type it tells:
 * "Transport endpoint is not connected" is a FUSE file system whose daemon exited (sshfs,
 * s3fs, a crashed fuse-overlayfs); a stale handle, a network file system's server that no
 * longer knows the directory. Such a path was skipped: `validate` said OK without naming
 * state.sqlite, and `run` failed with exit 1 blaming the run lock file for the ledger's path.
 */
const DEAD_MOUNTS: ReadonlyMap<string, string> = new Map([
  ['ENOTCONN', 'fuse'],
  ['ESTALE', 'network'],
]);

/** What one path's file system is. */
export interface FilesystemCheck {
  /** The config key: `lock.path` or `state.sqlite`. */
  key: 'lock.path' | 'state.sqlite';
  path: string;
  /** The path statfs looked at: the file, or its nearest existing parent. */
  probed: string;
  /** `ext4`, `nfs`, `fuse`, ... or `0x<magic>` for one we do not know (taken as local). */
  type: string;
  network: boolean;
  /** A kernel pseudo file system (proc, sysfs, ...): refused, whatever the config allows. */
  pseudo?: boolean;
  /**
   * statfs failed as only a dead network or FUSE mount fails (DEAD_MOUNTS): its FUSE daemon
   * is gone (ENOTCONN) or its server no longer knows the directory (ESTALE). `type` is then
   * `fuse` or `network`.
   */
  dead?: string;
  /** `lock.allowNetworkFilesystem` / `state.allowNetworkFilesystem`. */
  allowed: boolean;
}

/** The file system type behind a statfs magic number. */
export function filesystemType(magic: number): { type: string; network: boolean; pseudo?: boolean } {
  const m = magic >>> 0; // f_type is a signed long on some ABIs
  const network = NETWORK.get(m);
  if (network !== undefined) return { type: network, network: true };
  const pseudo = PSEUDO.get(m);
  if (pseudo !== undefined) return { type: pseudo, network: false, pseudo: true };
  return { type: LOCAL.get(m) ?? `0x${m.toString(16)}`, network: false };
}

/** What a path on a pseudo file system is told (`what`: the file cronsafe would write there). */
export const pseudoFilesystemMessage = (p: string, type: string, what: string): string =>
  `${p} is on ${type}, a file system the kernel makes up, where no ${what} can be written: use a directory on a volume`;

/**
 * The pseudo file system `p` is on (or, when it does not exist yet, its nearest existing
 * parent), or undefined: a real one, or one statfs cannot tell (EACCES, a loop of links:
 * said where the path is used).
 */
export function pseudoFilesystem(p: string, statfs: Statfs = fs.statfsSync): string | undefined {
  for (let probed = p; ; probed = path.dirname(probed)) {
    try {
      const found = filesystemType(statfs(probed).type);
      return found.pseudo === true ? found.type : undefined;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if ((code !== 'ENOENT' && code !== 'ENOTDIR') || path.dirname(probed) === probed) return undefined;
    }
  }
}

/**
 * The file systems of the paths cronsafe locks and writes its ledger on. With PostgreSQL
 * neither is used (the run lock is an advisory lock in the database), so none is checked.
 * A path whose statfs fails (EACCES) is left to the open, which names the error; one
 * behind a loop of symbolic links is a ConfigError (exit 78) naming its key.
 */
export function inspectFilesystems(config: Config, statfs: Statfs = fs.statfsSync): FilesystemCheck[] {
  if (config.state.sqlite === undefined) return [];
  const paths = [
    { key: 'lock.path' as const, path: config.lock.path, allowed: config.lock.allowNetworkFilesystem },
    { key: 'state.sqlite' as const, path: config.state.sqlite, allowed: config.state.allowNetworkFilesystem },
  ];
  const found: FilesystemCheck[] = [];
  for (const p of paths) {
    let probed = p.path;
    for (let hops = 0; hops < 64; hops++) {
      try {
        found.push({ ...p, probed, allowed: p.allowed === true, ...filesystemType(statfs(probed).type) });
        break;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        const dead = code === undefined ? undefined : DEAD_MOUNTS.get(code);
        if (dead !== undefined) {
          found.push({ ...p, probed, allowed: p.allowed === true, type: dead, network: true, dead: code });
          break;
        }
        // No open will ever get through a loop of links: a config problem, named now, not
        // a run that fails (exit 1) every time it is started.
        if (code === 'ELOOP') {
          throw new ConfigError(`${config.configPath}: ${p.key}: ${p.path} cannot be reached: its path runs into a loop of symbolic links (ELOOP)`, config.configPath, p.key);
        }
        if ((code !== 'ENOENT' && code !== 'ENOTDIR') || path.dirname(probed) === probed) break;
        // A dangling link is created where it points (the first write follows it): look
        // there. Anything else not created yet will be, on its parent's file system.
        probed = danglingTarget(probed) ?? path.dirname(probed);
      }
    }
  }
  return found;
}

/** Where a dangling symbolic link points, or null when `p` is not one. */
function danglingTarget(p: string): string | null {
  try {
    if (!fs.lstatSync(p).isSymbolicLink()) return null;
    return path.resolve(path.dirname(p), fs.readlinkSync(p));
  } catch {
    return null;
  }
}

const WHY: Record<FilesystemCheck['key'], string> = {
  'lock.path':
    'a flock there can be granted to two hosts at once (or not at all), so two runs could overlap; put lock.path on a node-local volume (an emptyDir on Kubernetes)',
  'state.sqlite':
    "SQLite's WAL needs memory shared between processes, which a network file system cannot give, so the ledger can be corrupted; put state.sqlite on a node-local or ReadWriteOnce volume, or use state.postgres for state shared between pods",
};

/** The warning (allowed) or refusal (not allowed) for a path on a network file system. */
export function networkFilesystemMessage(c: FilesystemCheck): string {
  const optIn = `${c.key === 'lock.path' ? 'lock' : 'state'}.allowNetworkFilesystem`;
  const what = c.dead !== undefined ? deadMount(c) : c.type === 'fuse' ? 'a FUSE file system' : `a network file system (${c.type})`;
  return `${c.key}: ${c.path} is on ${what}: ${WHY[c.key]}${c.allowed ? ` (allowed by ${optIn}: true)` : `; or set ${optIn}: true to run there anyway`}`;
}

/** A dead mount, as the messages say it. */
const deadMount = (c: FilesystemCheck): string =>
  c.dead === 'ENOTCONN'
    ? 'a FUSE file system that is not connected (ENOTCONN: its daemon is gone)'
    : `a network file system that does not answer for it (${c.dead ?? ''}: a stale handle, the mount is dead)`;

/**
 * `run`, `daemon` and `validate`: refuse (ConfigError, exit 78) a lock or SQLite ledger on a
 * network file system unless the config allows it. Returns every check, for the caller to
 * report (validate) or warn about (each run, while one is allowed).
 */
export function checkFilesystems(config: Config, statfs?: Statfs): FilesystemCheck[] {
  const checks = inspectFilesystems(config, statfs);
  const pseudo = checks.filter((c) => c.pseudo === true);
  if (pseudo[0]) {
    const lines = pseudo.map((c) => `${config.configPath}: ${c.key}: ${pseudoFilesystemMessage(c.path, c.type, c.key === 'lock.path' ? 'lock file' : 'ledger')}`);
    throw new ConfigError(lines.join('\n'), config.configPath, pseudo[0].key);
  }
  const refused = checks.filter((c) => c.network && !c.allowed);
  if (refused[0]) {
    const lines = refused.map((c) => `${config.configPath}: ${networkFilesystemMessage(c)}`);
    throw new ConfigError(lines.join('\n'), config.configPath, refused[0].key);
  }
  // Allowed there, but the mount is dead: nothing can be opened on it until it is mounted
  // again, which is the environment's fault, not the config's (exit 1, as a store that
  // cannot be reached).
  const dead = checks.filter((c) => c.dead !== undefined);
  if (dead[0]) {
    throw new StateUnavailable(dead.map((c) => `${config.configPath}: ${c.key}: ${c.path} is on ${deadMount(c)}: mount it again`).join('\n'));
  }
  return checks;
}

/**
 * The commands that read or edit the ledger without a run (status, dead-letter, requeue,
 * plan, schedule): a SQLite ledger on a file system the kernel makes up is refused as `run` and
 * `validate` refuse it (ConfigError, exit 78, the same line). They said "no ledger file ...:
 * no run has created it yet" (exit 1), as if a run could ever make one there. Only
 * state.sqlite: they take no lock, and a network file system is the run's to refuse.
 */
export function refusePseudoLedger(config: Config, statfs?: Statfs): void {
  let pseudo: FilesystemCheck | undefined;
  try {
    pseudo = inspectFilesystems(config, statfs).find((c) => c.key === 'state.sqlite' && c.pseudo === true);
  } catch (err) {
    if (err instanceof ConfigError) return; // a loop of links: the open names it, as before
    throw err;
  }
  if (pseudo === undefined) return;
  throw new ConfigError(`${config.configPath}: state.sqlite: ${pseudoFilesystemMessage(pseudo.path, pseudo.type, 'ledger')}`, config.configPath, 'state.sqlite');
}
