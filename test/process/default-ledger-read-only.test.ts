import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { FIXTURES, runCli } from '../helpers/cli.js';

const isRoot = process.getuid?.() === 0;

// A config mounted from a ConfigMap (read-only) with no state.sqlite: the default ledger goes
// beside it, in <config dir>/.cronsafe, which can never be made there. validate said OK and
// every run failed with exit 1 (counted toward backoffLimit) on `EROFS ... mkdir`.
describe('state.sqlite not set, the config on a read-only file system', () => {
  it.skipIf(!isRoot)('validate and run exit 78 naming state.sqlite and what to do; status says there is no ledger yet; with state.sqlite set the run works', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-rocfg-'));
    const cfgDir = path.join(dir, 'config');
    const source = path.join(dir, 'source');
    mkdirSync(cfgDir);
    mkdirSync(source);
    writeFileSync(path.join(source, 'a.txt'), 'a');
    const config = {
      name: 'ro-job',
      source: { directory: source },
      output: { directory: path.join(dir, 'out') },
      handler: { module: path.join(FIXTURES, 'process/fail-some-module.mjs') },
    };
    const configPath = path.join(cfgDir, 'job.yaml');
    writeFileSync(configPath, YAML.stringify(config));
    const withState = path.join(dir, 'with-state.yaml');
    writeFileSync(withState, YAML.stringify({ ...config, state: { sqlite: path.join(dir, 'state', 'ro-job.db') } }));
    expect(spawnSync('mount', ['--bind', cfgDir, cfgDir]).status).toBe(0);
    try {
      expect(spawnSync('mount', ['-o', 'remount,ro,bind', cfgDir]).status).toBe(0);
      const db = path.join(cfgDir, '.cronsafe', 'ro-job.db');
      for (const cmd of ['validate', 'run']) {
        const r = await runCli([cmd, '-c', configPath]);
        expect(r.code, r.stderr).toBe(78);
        expect(r.stderr).toContain(`state.sqlite: not set, and the default ledger ${db} cannot be created: ${cfgDir} is on a read-only file system`);
        expect(r.stderr).toContain('set state.sqlite to a file on a writable volume');
        expect(r.stderr).not.toMatch(/\n\s+at /);
      }
      expect(existsSync(path.join(dir, 'out'))).toBe(false);
      // The readers only read: no ledger yet, as anywhere else.
      const status = await runCli(['status', '-c', configPath]);
      expect(status.stderr).toContain(`no ledger file at ${db}: no run has created it yet`);
      const ok = await runCli(['run', '-c', withState]);
      expect(ok.code, ok.stderr).toBe(0);
    } finally {
      spawnSync('umount', [cfgDir]);
    }
  });
});
