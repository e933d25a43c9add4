/**
 * Every config error names the file and the key (`<file>: <key>: <problem>`, docs/configuration.md).
 * Those raised below the config loader knew only their key: state.sqlite naming another
 * program's database, a directory at the start journal's path, the old shared default
 * ledger used by two jobs, a loop of links on lock.path's way. `validate` and `run` said
 * `cronsafe: config error: state.sqlite: ...` (or `lock.path: ...`): no file, so with many
 * configs (one per CronJob) nothing said which one was wrong.
 * The readers (status, plan, dead-letter list) said a loop of links at state.sqlite was an
 * unavailable store (exit 1), where run and validate said it was the config (78).
 */
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { runCli, workspace, type Workspace } from '../helpers/cli.js';

const plants: [string, string, (ws: Workspace) => Workspace][] = [
  ['state.sqlite naming another database', 'state.sqlite', (ws) => {
    mkdirSync(path.dirname(ws.db), { recursive: true });
    const db = new Database(ws.db);
    db.exec('CREATE TABLE users (id INTEGER PRIMARY KEY)');
    db.close();
    return ws;
  }],
  ["a directory at the start journal's path", 'state.sqlite', (ws) => {
    mkdirSync(`${ws.db}-starts`, { recursive: true });
    return ws;
  }],
  ['a loop of symbolic links on the way to lock.path', 'lock.path', (ws) => {
    symlinkSync('loop', path.join(ws.dir, 'loop'));
    const config = { name: 'test-job', source: { directory: ws.source }, handler: { command: ['true'] }, state: { sqlite: ws.db }, lock: { path: path.join(ws.dir, 'loop', 'x.lock') } };
    writeFileSync(ws.configPath, YAML.stringify(config));
    return ws;
  }],
  ['the old shared default ledger, used by this job and another', 'state.sqlite', (ws) => {
    // No state.sqlite: the default, in <config dir>/.cronsafe/, where the old cronsafe.db
    // records no job and the locks of two jobs lie beside it.
    const stateDir = path.join(ws.dir, '.cronsafe');
    mkdirSync(stateDir);
    new Database(path.join(stateDir, 'cronsafe.db')).close();
    writeFileSync(path.join(stateDir, 'test-job.lock'), '');
    writeFileSync(path.join(stateDir, 'other-job.lock'), '');
    writeFileSync(ws.configPath, YAML.stringify({ name: 'test-job', source: { directory: ws.source }, handler: { command: ['true'] } }));
    return ws;
  }],
];

describe('a config error found past the config loader', () => {
  it.each(plants)('%s: validate and run name the config file, then the key', async (_what, key, plant) => {
    const ws = plant(workspace({ handler: { command: ['true'] } }, { 'a.txt': 'a' }));
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', ws.configPath]);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr, cmd).toMatch(new RegExp(`^cronsafe: config error: ${ws.configPath.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: ${key.replace('.', '\\.')}: `, 'm'));
    }
  }, 30_000);
});

describe('a loop of symbolic links at state.sqlite', () => {
  it('is a config error (78) naming the file and the key for the readers too, as for validate and run', async () => {
    const ws = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'a' });
    mkdirSync(path.dirname(ws.db), { recursive: true });
    symlinkSync(path.basename(ws.db) + '.other', ws.db);
    symlinkSync(path.basename(ws.db), `${ws.db}.other`);
    const file = ws.configPath.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    for (const cmd of [['validate'], ['run'], ['status'], ['plan'], ['dead-letter', 'list']]) {
      const r = await runCli([...cmd, '-c', ws.configPath]);
      expect(r.code, `${cmd.join(' ')}: ${r.stderr}`).toBe(78);
      expect(r.stderr, cmd.join(' ')).toMatch(new RegExp(`^cronsafe: config error: ${file}: state\\.sqlite: .*loop of symbolic links`, 'm'));
    }
  }, 30_000);
});
