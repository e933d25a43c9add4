/**
 * lock.path naming a file that holds data a run did not write is a config error (a user's
 * file would be overwritten), but only where the run would write it: a whitespace-only file
 * is as empty to the lock as to `echo > file` (flock.ts reads no holder from it), and with
 * PostgreSQL the run lock is an advisory lock that never opens lock.path.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import type { ConfigError } from '../../src/errors.js';
import { configError, expectProblem, useConfigDir } from '../helpers/config-files.js';

describe('lock.path holding data', () => {
  const dir = useConfigDir();

  it.each([['a newline', '\n'], ['blanks and a newline', '  \n'], ['CRLF only', '\r\n']])('%s (echo > file): a lock file, untouched by loading', (_name, data) => {
    const lock = path.join(dir.root, 'job.lock');
    fs.writeFileSync(lock, data);
    expect(loadConfig(dir.minimal(`lock: {path: ${lock}}\n`)).lock.path).toBe(lock);
    expect(fs.readFileSync(lock, 'utf8')).toBe(data);
  });

  it("a user's file is still refused with SQLite, naming lock.path", () => {
    const lock = path.join(dir.root, 'notes.txt');
    fs.writeFileSync(lock, 'my notes\n');
    const file = dir.minimal(`lock: {path: ${lock}}\n`);
    expectProblem(file, 'lock.path', `${lock} holds 9 bytes, not a cronsafe lock: the lock would overwrite it; point lock.path elsewhere (or empty the file)`);
  });

  it('with state.postgres lock.path is never opened: a file there is no obstacle', () => {
    const lock = path.join(dir.root, 'notes.txt');
    fs.writeFileSync(lock, 'my notes\n');
    const file = dir.minimal(`state: {postgres: "postgres://u@127.0.0.1:1/db"}\nlock: {path: ${lock}}\n`);
    expect(loadConfig(file).state.postgres).toBe('postgres://u@127.0.0.1:1/db');
    expect(fs.readFileSync(lock, 'utf8')).toBe('my notes\n');
  });

  it('a link, a directory or a FIFO at lock.path is a config error naming lock.path (no run could take it), the link target untouched', () => {
    const target = path.join(dir.root, 'precious.txt');
    fs.writeFileSync(target, 'keep\n');
    const link = path.join(dir.root, 'link.lock');
    fs.symlinkSync(target, link);
    expectProblem(dir.minimal(`lock: {path: ${link}}\n`), 'lock.path', `${link} is a symbolic link: cronsafe never writes through links; remove it or point lock.path elsewhere`);
    expect(fs.readFileSync(target, 'utf8')).toBe('keep\n');
    const sub = path.join(dir.root, 'locks');
    fs.mkdirSync(sub);
    const refused = (lock: string): ConfigError => {
      const file = dir.minimal(`lock: {path: ${lock}}\n`);
      const err = configError(() => loadConfig(file));
      expect(err.key).toBe('lock.path');
      return err;
    };
    expect(refused(sub).message).toMatch(new RegExp(`lock\\.path: ${sub} is a directory, expected the lock file \\(e\\.g\\. ${sub}/.+\\.lock\\)$`));
    const fifo = path.join(dir.root, 'fifo.lock');
    if (spawnSync('mkfifo', [fifo]).status === 0) {
      expect(refused(fifo).message).toMatch(/lock\.path: .*fifo\.lock is not a regular file \(a FIFO, socket or device\)/);
    }
  });
});
