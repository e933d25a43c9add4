import { readdirSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, finished, runCli, statusJson, workspace } from '../helpers/cli.js';

const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];

describe('output.directory inside source.directory', () => {
  it('equal to source.directory: validate and run exit 78 naming output.directory', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a' });
    const bad = workspace({ handler: { command: COPY }, source: { directory: ws.source }, output: { directory: ws.source } });
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', bad.configPath]);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toMatch(/output\.directory/);
      expect(r.stderr).toMatch(/is source\.directory itself/);
    }
    expect(readdirSync(ws.source)).toEqual(['a.txt']); // nothing ran
  });

  it('inside it, directly or through a link, without an exclude: exit 78 with the exclude to add', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a' });
    const inside = workspace({ handler: { command: COPY }, source: { directory: ws.source }, output: { directory: path.join(ws.source, 'results') } });
    const r = await runCli(['run', '-c', inside.configPath]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toMatch(/output\.directory/);
    expect(r.stderr).toContain('source.exclude: ["results/**"]');

    // The same directory named through a link: the scan's by-name skip would miss it.
    const link = path.join(ws.dir, 'link-to-source');
    symlinkSync(ws.source, link);
    const viaLink = workspace({ handler: { command: COPY }, source: { directory: ws.source }, output: { directory: path.join(link, 'results') } });
    const v = await runCli(['validate', '-c', viaLink.configPath]);
    expect(v.code, v.stderr).toBe(78);
    expect(v.stderr).toContain('source.exclude: ["results/**"]');
  });

  it('inside it with an exclude that covers it: accepted, and outputs never become items', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a', 'b.txt': 'b' });
    const ok = workspace({
      handler: { command: COPY },
      source: { directory: ws.source, exclude: ['results/**'] },
      output: { directory: path.join(ws.source, 'results') },
    });
    for (let i = 0; i < 2; i++) {
      const r = await runCli(['run', '-c', ok.configPath]);
      expect(r.code, r.stderr).toBe(0);
      expect(finished(r)?.counts).toMatchObject({ scanned: 2 });
    }
    expect((await statusJson(ok.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
  });
});
