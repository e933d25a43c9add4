import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkFilesystems, filesystemType, inspectFilesystems, type Statfs } from '../../src/config/filesystems.js';
import { loadConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/types.js';
import { configError, expectProblem, useConfigDir } from '../helpers/config-files.js';

const dir = useConfigDir();

/** statfs(2) as a table: the longest prefix of the path decides, like a mount table. */
function mounts(table: Record<string, number>): Statfs & { asked: string[] } {
  const asked: string[] = [];
  const fn = (p: string) => {
    asked.push(p);
    if (!fs.existsSync(p)) throw Object.assign(new Error(`ENOENT: ${p}`), { code: 'ENOENT' });
    const mount = Object.keys(table).filter((m) => p === m || p.startsWith(m === '/' ? '/' : `${m}/`)).sort((a, b) => b.length - a.length)[0];
    return { type: table[mount ?? '/'] ?? 0xef53 };
  };
  return Object.assign(fn, { asked });
}

const NETWORK = [
  [0x6969, 'nfs'],
  [0x517b, 'smb'],
  [0xff534d42, 'cifs'],
  [0xfe534d42, 'smb2'],
  [0x00c36400, 'ceph'],
  [0x01021997, '9p'],
  [0x0bd00bd0, 'lustre'],
  [0x65735546, 'fuse'],
  [0x5346414f, 'afs'],
  [0x6b414653, 'kafs'],
  [0x47504653, 'gpfs'],
] as const;

const LOCAL = [
  [0xef53, 'ext4'],
  [0x58465342, 'xfs'],
  [0x9123683e, 'btrfs'],
  [0x01021994, 'tmpfs'],
  [0x794c7630, 'overlay'],
  [0x2fc12fc1, 'zfs'],
] as const;

const load = (extra = ''): Config => loadConfig(dir.minimal(extra));

describe('filesystemType', () => {
  it.each(NETWORK)('0x%s is %s, a network or FUSE file system', (magic, type) => {
    expect(filesystemType(magic)).toEqual({ type, network: true });
  });

  it.each(LOCAL)('0x%s is %s, local', (magic, type) => {
    expect(filesystemType(magic)).toEqual({ type, network: false });
  });

  it('reads a magic number given as a signed long (CIFS on a 32-bit ABI)', () => {
    expect(filesystemType(0xff534d42 | 0)).toEqual({ type: 'cifs', network: true });
  });

  it('names an unknown type by its magic number and takes it as local', () => {
    expect(filesystemType(0x12345678)).toEqual({ type: '0x12345678', network: false });
  });
});

describe('checkFilesystems', () => {
  it.each(LOCAL)('accepts the lock and ledger on %s (0x%s)', (magic, type) => {
    const checks = checkFilesystems(load(), mounts({ '/': magic }));
    expect(checks.map((c) => [c.key, c.type, c.network])).toEqual([
      ['lock.path', type, false],
      ['state.sqlite', type, false],
    ]);
  });

  it.each(NETWORK)('refuses the lock and ledger on 0x%s (%s), naming the key, the type and the fix', (magic, type) => {
    const config = load();
    const err = configError(() => checkFilesystems(config, mounts({ [dir.root]: magic })));
    const what = type === 'fuse' ? 'a FUSE file system' : `a network file system (${type})`;
    expect(err.key).toBe('lock.path');
    expect(err.message).toContain(`${config.configPath}: lock.path: ${config.lock.path} is on ${what}`);
    expect(err.message).toContain('an emptyDir');
    expect(err.message).toContain('lock.allowNetworkFilesystem: true');
    expect(err.message).toContain(`${config.configPath}: state.sqlite: ${config.state.sqlite} is on ${what}`);
    expect(err.message).toContain('use state.postgres for state shared between pods');
    expect(err.message).toContain('state.allowNetworkFilesystem: true');
  });

  it.each(['lock.path', 'state.sqlite'] as const)('%s behind a loop of symbolic links: a ConfigError naming the key (no open can ever pass it)', (key) => {
    const loop = path.join(dir.root, 'loop');
    fs.mkdirSync(loop);
    fs.symlinkSync(path.join(loop, 'b'), path.join(loop, 'a'));
    fs.symlinkSync(path.join(loop, 'a'), path.join(loop, 'b'));
    const file = path.join(loop, 'a', 'x');
    const config = load(key === 'lock.path' ? `lock: {path: ${file}}\n` : `state: {sqlite: ${file}}\nlock: {path: ${dir.root}/job.lock}\n`);
    const err = configError(() => checkFilesystems(config));
    expect(err.key).toBe(key);
    expect(err.message).toContain(`${key}: ${file} cannot be reached`);
    expect(err.message).toContain('loop of symbolic links');
  });

  it('refuses only the path on the network mount', () => {
    const config = load(`lock: {path: ${dir.root}/local/job.lock}\nstate: {sqlite: ${dir.root}/nfs/job.db}\n`);
    fs.mkdirSync(path.join(dir.root, 'nfs'));
    const err = configError(() => checkFilesystems(config, mounts({ [path.join(dir.root, 'nfs')]: 0x6969 })));
    expect(err.key).toBe('state.sqlite');
    expect(err.message).not.toContain('lock.path');
  });

  it('looks at the nearest existing parent of a path not created yet', () => {
    const statfs = mounts({ [dir.root]: 0x6969 });
    const config = load(`state: {sqlite: ${dir.root}/not/yet/job.db}\n`);
    const checks = inspectFilesystems(config, statfs);
    expect(checks.find((c) => c.key === 'state.sqlite')).toMatchObject({ probed: dir.root, type: 'nfs', network: true });
    expect(statfs.asked).toContain(path.join(dir.root, 'not/yet/job.db'));
  });

  it('follows a lock file that is a link onto a network mount', () => {
    const nfs = path.join(dir.root, 'nfs');
    fs.mkdirSync(nfs);
    fs.writeFileSync(path.join(nfs, 'real.lock'), '');
    fs.symlinkSync(path.join(nfs, 'real.lock'), path.join(dir.root, 'job.lock'));
    // statfs(2) follows links: the fake resolves them as the kernel would.
    const table = mounts({ [nfs]: 0x6969 });
    const statfs: Statfs = (p) => table(fs.existsSync(p) ? fs.realpathSync(p) : p);
    const err = configError(() => checkFilesystems(load(`lock: {path: ${dir.root}/job.lock}\n`), statfs));
    expect(err.key).toBe('lock.path');
  });

  // (A link to a missing directory on the way is a config error of its own: nothing can be
  // made under it. dangling-link-paths.test.ts)
  it('follows a dangling link to the ledger file, and a link to a directory, to where they will be created: onto a network mount', () => {
    const nfs = path.join(dir.root, 'nfs');
    fs.mkdirSync(nfs);
    fs.symlinkSync(path.join(nfs, 'not-yet.db'), path.join(dir.root, 'ledger.db'));
    const locks = path.join(dir.root, 'locks');
    fs.symlinkSync(nfs, locks);
    // statfs(2) follows the link to the mount; the table is by name, so it lists the link too.
    const statfs = mounts({ [nfs]: 0x6969, [locks]: 0x6969 });
    const config = load(`state: {sqlite: ${dir.root}/ledger.db}\nlock: {path: ${locks}/no-dir/job.lock}\n`);
    const checks = inspectFilesystems(config, statfs);
    expect(checks.map((c) => [c.key, c.probed, c.type])).toEqual([
      ['lock.path', locks, 'nfs'],
      ['state.sqlite', nfs, 'nfs'],
    ]);
    expect(configError(() => checkFilesystems(config, statfs)).key).toBe('lock.path');
  });

  it('with the opt-ins, runs on a network file system and reports it (the run warns)', () => {
    const config = load('lock: {allowNetworkFilesystem: true}\nstate: {allowNetworkFilesystem: true}\n');
    const checks = checkFilesystems(config, mounts({ [dir.root]: 0x6969 }));
    expect(checks.map((c) => [c.key, c.type, c.network, c.allowed])).toEqual([
      ['lock.path', 'nfs', true, true],
      ['state.sqlite', 'nfs', true, true],
    ]);
  });

  it('an opt-in for one key does not cover the other', () => {
    const config = load('lock: {allowNetworkFilesystem: true}\n');
    const err = configError(() => checkFilesystems(config, mounts({ [dir.root]: 0x6969 })));
    expect(err.key).toBe('state.sqlite');
    expect(err.message).not.toContain('lock.path:');
  });

  it('checks nothing with PostgreSQL: the run lock is an advisory lock in the database', () => {
    const config = load('state: {postgres: "postgres://u@db/cs"}\n');
    const statfs = mounts({ '/': 0x6969 });
    expect(checkFilesystems(config, statfs)).toEqual([]);
    expect(statfs.asked).toEqual([]);
  });

  it('leaves a path whose statfs fails otherwise (EACCES) to the open, which names the error', () => {
    const statfs: Statfs = () => {
      throw Object.assign(new Error('EACCES'), { code: 'EACCES' });
    };
    expect(checkFilesystems(load(), statfs)).toEqual([]);
  });

  it('refuses a path on a dead mount (ENOTCONN: a FUSE daemon gone; ESTALE) as a network one, and with the opt-in says it is dead (exit 1)', () => {
    for (const [code, type, said] of [
      ['ENOTCONN', 'fuse', 'a FUSE file system that is not connected (ENOTCONN: its daemon is gone)'],
      ['ESTALE', 'network', 'a network file system that does not answer for it (ESTALE: a stale handle, the mount is dead)'],
    ] as const) {
      const statfs: Statfs = () => {
        throw Object.assign(new Error(code), { code });
      };
      const config = load();
      const checks = inspectFilesystems(config, statfs);
      expect(checks.map((c) => [c.key, c.type, c.network, c.dead])).toEqual([
        ['lock.path', type, true, code],
        ['state.sqlite', type, true, code],
      ]);
      const refused = configError(() => checkFilesystems(config, statfs));
      expect(refused.key).toBe('lock.path');
      expect(refused.message).toContain(`state.sqlite: ${config.state.sqlite} is on ${said}:`);
      const allowed = { ...config, lock: { ...config.lock, allowNetworkFilesystem: true }, state: { ...config.state, allowNetworkFilesystem: true } };
      expect(() => checkFilesystems(allowed, statfs)).toThrow(`state.sqlite: ${config.state.sqlite} is on ${said}: mount it again`);
      expect(() => checkFilesystems(allowed, statfs)).toThrow(expect.objectContaining({ exitCode: 1 }) as Error);
    }
  });

  it('the real statfs finds this machine\'s temp directory local', () => {
    const checks = checkFilesystems(load());
    expect(checks).toHaveLength(2);
    for (const c of checks) expect(c.network).toBe(false);
  });
});

describe('config keys', () => {
  it('default to false, and take only booleans', () => {
    const c = load();
    expect([c.lock.allowNetworkFilesystem, c.state.allowNetworkFilesystem]).toEqual([false, false]);
    expectProblem(dir.minimal('lock: {allowNetworkFilesystem: "yes"}\n'), 'lock.allowNetworkFilesystem', 'expected true or false, got "yes"');
    expectProblem(dir.minimal('state: {allowNetworkFilesystem: 1}\n'), 'state.allowNetworkFilesystem', 'expected true or false, got 1');
  });
});
