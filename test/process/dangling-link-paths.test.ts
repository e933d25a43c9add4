import { existsSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, FIXTURES, runCli, workspace } from '../helpers/cli.js';

// A link to nothing on the way to output.directory, state.sqlite or lock.path (a volume
// reached through a link and not mounted, a link to a directory not made yet): no run can
// create anything under it (mkdir says EEXIST or ENOENT). validate said OK and every run
// failed with exit 1, for output.directory with a bare ENOENT and its stack trace.

const handler = { module: path.join(FIXTURES, 'process/fail-some-module.mjs') };

/** A workspace with `<dir>/gone`, a link to the missing `<dir>/not-mounted`. */
function withDanglingLink(): { ws: ReturnType<typeof workspace>; link: string; target: string } {
  const ws = workspace({ handler }, { 'a.scc': 'a' });
  const target = path.join(ws.dir, 'not-mounted');
  const link = path.join(ws.dir, 'gone');
  symlinkSync(target, link);
  return { ws, link, target };
}

describe('a path through a link to nothing is a config error naming its key (exit 78), in validate and run', () => {
  it.each([
    ['output.directory, the link itself', (link: string) => ({ output: { directory: link } }), 'output.directory'],
    ['output.directory, under the link', (link: string) => ({ output: { directory: path.join(link, 'out') } }), 'output.directory'],
    ['state.sqlite', (link: string) => ({ state: { sqlite: path.join(link, 'state', 'job.db') } }), 'state.sqlite'],
    ['lock.path', (link: string) => ({ lock: { path: path.join(link, 'job.lock') } }), 'lock.path'],
  ])('%s', async (_what, patch, key) => {
    const { ws, link, target } = withDanglingLink();
    configure(ws, patch(link));
    for (const command of ['validate', 'run']) {
      const r = await runCli([command, '-c', ws.configPath]);
      expect(r.code, `${command}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(`${key}: `);
      expect(r.stderr).toContain(`${link} is a symbolic link to ${target}, which does not exist`);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
    expect(existsSync(target)).toBe(false);
  });

  it('a link to a directory that is there still works, the missing part below it made', async () => {
    const { ws, link, target } = withDanglingLink();
    mkdirSync(target);
    configure(ws, { output: { directory: path.join(link, 'out') }, state: { sqlite: path.join(link, 'state', 'job.db') } });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(readdirSync(target).sort()).toEqual(['out', 'state']);
  });
  it('state.sqlite itself a link to a file in a directory that is not there (a volume not mounted): 78 naming the link', async () => {
    const { ws, target } = withDanglingLink();
    mkdirSync(ws.state);
    symlinkSync(path.join(target, 'job.db'), ws.db);
    for (const command of ['validate', 'run']) {
      const r = await runCli([command, '-c', ws.configPath]);
      expect(r.code, `${command}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(`state.sqlite: the ledger file cannot be created: ${ws.db} is a symbolic link to ${path.join(target, 'job.db')}, whose directory does not exist`);
    }
    expect(existsSync(target)).toBe(false);
  });

  it('state.sqlite a link to a file not made yet in a directory that is there: the run makes it', async () => {
    const { ws, target } = withDanglingLink();
    mkdirSync(target);
    mkdirSync(ws.state);
    symlinkSync(path.join(target, 'job.db'), ws.db);
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(readdirSync(target)).toContain('job.db');
  });
});
