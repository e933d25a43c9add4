import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, FIXTURES, runCli, workspace } from '../helpers/cli.js';

const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];

// cronsafe renames each output over `<output.directory>/<id>.out` and empties
// `<output.directory>/.cronsafe-tmp` at every start. A ledger (or lock) kept where either
// happens was replaced or deleted by cronsafe itself, and the run still exited 0.
describe('the ledger or the lock where outputs and temp files go', () => {
  it('state.sqlite named <id>.out in output.directory: exit 78 naming it, the ledger is never replaced by an output', async () => {
    const ws = workspace({ handler: { command: COPY } }, { x: 'input of x\n' });
    configure(ws, { state: { sqlite: path.join(ws.out, 'x.out') } });
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', ws.configPath]);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toMatch(/state\.sqlite: .*x\.out is inside output\.directory and ends in \.out/);
      expect(r.stderr).toContain('the output of an item "x" would replace it');
    }
    // Before: the run exited 0 with x.out holding the item's output, not the ledger.
    expect(existsSync(path.join(ws.out, 'x.out'))).toBe(false);
  });

  it('lock.path named <id>.out in output.directory: exit 78 naming lock.path', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'sub/y': 'y\n' });
    configure(ws, { lock: { path: path.join(ws.out, 'sub', 'y.out') } });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toMatch(/lock\.path: .*y\.out is inside output\.directory/);
    expect(r.stderr).toContain('the output of an item "sub/y" would replace it');
  });

  it('state.sqlite inside output.directory/.cronsafe-tmp: exit 78, the ledger is not deleted at the start of each run', async () => {
    const ws = workspace({ handler: { command: COPY } }, { a: 'a\n' });
    const db = path.join(ws.out, '.cronsafe-tmp', 'job-test-job', 'ledger.db');
    configure(ws, { state: { sqlite: db } });
    const r = await runCli(['run', '-c', ws.configPath]);
    // Before: exit 0, and the ledger was gone after the run (deleted by the start-up clean-up).
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toMatch(/state\.sqlite: .*ledger\.db is inside .*\.cronsafe-tmp, cronsafe's temp directory/);
    expect(existsSync(path.join(ws.out, 'a.out'))).toBe(false);
  });

  it('a ledger in output.directory under another name is fine: it survives the runs', async () => {
    const ws = workspace({ handler: { command: COPY } }, { x: 'input of x\n', 'x.db': 'not the ledger\n' });
    const db = path.join(ws.out, 'x.db');
    configure(ws, { state: { sqlite: db } });
    for (let i = 0; i < 2; i++) {
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(0);
    }
    expect(readFileSync(db).subarray(0, 15).toString()).toBe('SQLite format 3');
    expect(readFileSync(path.join(ws.out, 'x.out'), 'utf8')).toMatch(/^input of x\n/);
  });

  it.skipIf(process.getuid?.() !== 0)('state.sqlite named <id>.out in output.directory mounted under another path (a bind mount): exit 78 naming it, the ledger is never replaced', async () => {
    const ws = workspace({ handler: { command: COPY } }, { x: 'input of x\n' });
    mkdirSync(ws.out);
    const alias = path.join(ws.dir, 'state-mount');
    mkdirSync(alias);
    expect(spawnSync('mount', ['--bind', ws.out, alias]).status).toBe(0);
    try {
      configure(ws, { state: { sqlite: path.join(alias, 'x.out') } });
      for (const cmd of ['validate', 'run']) {
        const r = await runCli([cmd, '-c', ws.configPath]);
        // Before: validate OK; run replaced the ledger with x's output (exit 75), then every run exited 78 "not an SQLite database".
        expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
        expect(r.stderr).toMatch(/state\.sqlite: .*x\.out is inside output\.directory and ends in \.out/);
      }
      expect(existsSync(path.join(ws.out, 'x.out'))).toBe(false);
    } finally {
      spawnSync('umount', [alias]);
    }
  });
});
