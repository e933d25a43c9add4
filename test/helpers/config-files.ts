/** Temp config directories for the config tests: real files, one fresh directory per test. */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, expect } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/errors.js';

export interface ConfigDir {
  /** The temp directory (config files are written here). */
  readonly root: string;
  /** `<root>/queue`, an existing empty directory. */
  readonly queue: string;
  /** Write `yaml` to `<root>/<name>` and return the absolute path. */
  write: (yaml: string, name?: string) => string;
  /** A minimal valid config (source: queue, a command handler) plus `extra` top-level YAML. */
  minimal: (extra?: string) => string;
}

/** Registers hooks that give each test its own directory; call at describe/file level. */
export function useConfigDir(): ConfigDir {
  let root = '';
  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'cronsafe-config-'));
    fs.mkdirSync(path.join(root, 'queue'));
  });
  afterEach(() => {
    fs.rmSync(root, { recursive: true, force: true });
  });
  const dir: ConfigDir = {
    get root() {
      return root;
    },
    get queue() {
      return path.join(root, 'queue');
    },
    write(yaml, name = 'cronsafe.yaml') {
      const file = path.join(root, name);
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, yaml);
      return file;
    },
    minimal(extra = '') {
      return dir.write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [echo, "{path}"]}\n${extra}`);
    },
  };
  return dir;
}

/** The ConfigError `fn` throws; fails the test if it throws nothing or something else. */
export function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError, got none');
}

/** Assert exactly one problem: message `<file>: <key>: <text>`, that key, that file. */
export function expectProblem(file: string, key: string, text: string, env: NodeJS.ProcessEnv = {}): void {
  const err = configError(() => loadConfig(file, { env }));
  expect(err.message).toBe(`${file}: ${key}: ${text}`);
  expect(err.key).toBe(key);
  expect(err.file).toBe(file);
}
