import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, FIXTURES, finished, runCli, statusJson, workspace } from '../helpers/cli.js';

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

  it('inside it where no source.include glob reaches (include ["*.txt"]; a dot directory under "**"): accepted without an exclude, and outputs never become items', async () => {
    // The scan enters no directory its include globs cannot match into, which is as sure a
    // proof as an exclude: the config check asked for an exclude all the same (exit 78).
    for (const [include, dir] of [[['*.txt'], 'results'], [['**'], '.results'], [['in/*.txt'], 'results']] as const) {
      const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a', 'b.txt': 'b', 'in/c.txt': 'c' });
      const ok = workspace({ handler: { command: COPY }, source: { directory: ws.source, include: [...include] }, output: { directory: path.join(ws.source, dir) } });
      for (let i = 0; i < 2; i++) {
        const r = await runCli(['run', '-c', ok.configPath]);
        expect(r.code, `${include.join()} ${dir}: ${r.stderr}`).toBe(0);
      }
      const done = include[0] === '**' ? 3 : include[0] === '*.txt' ? 2 : 1;
      expect((await statusJson(ok.configPath)).items, include.join()).toEqual({ pending: 0, claimed: 0, done, dead: 0 });
    }
    // A glob that reaches it still needs the exclude.
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a' });
    const bad = workspace({ handler: { command: COPY }, source: { directory: ws.source, include: ['*.txt', '*/*.out'] }, output: { directory: path.join(ws.source, 'results') } });
    const v = await runCli(['validate', '-c', bad.configPath]);
    expect(v.code, v.stderr).toBe(78);
    expect(v.stderr).toContain('source.exclude: ["results/**"]');
  });

  it('named with a backslash: the exclude it suggests is accepted and keeps outputs out of the scan', async () => {
    // Before: the check matched the exclude against `res\ults` while the scan's id is
    // `res\\ults`, and suggested ["res\ults/**"] (a YAML error: `\u` wants hex digits), so
    // no exclude made the config valid.
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a', 'b.txt': 'b' });
    const cfg = workspace({ handler: { command: COPY }, source: { directory: ws.source }, output: { directory: path.join(ws.source, 'res\\ults') } });
    const v = await runCli(['validate', '-c', cfg.configPath]);
    expect(v.code, v.stderr).toBe(78);
    const suggested = /source\.exclude: (\[.*\])$/.exec(v.stderr.trim())?.[1];
    expect(suggested).toBe('["res\\\\\\\\ults/**"]');
    configure(cfg, { source: { directory: ws.source, exclude: JSON.parse(suggested!) as string[] } });
    for (let i = 0; i < 2; i++) {
      const r = await runCli(['run', '-c', cfg.configPath]);
      expect(r.code, r.stderr).toBe(0);
      expect(finished(r)?.counts).toMatchObject({ scanned: 2 });
    }
    expect(readdirSync(path.join(ws.source, 'res\\ults')).filter((f) => !f.startsWith('.')).sort()).toEqual(['a.txt.out', 'b.txt.out']);
  });

  it('named with glob characters (q?, res*): the exclude it suggests names that directory alone', async () => {
    // Before: it suggested the name as a glob, ["q?/**"], which validate accepted though it
    // also left out qa/ (its files never processed), and ["res*/**"], which does not match
    // `res*` itself: the same error again, whatever was added.
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a', 'qa/b.txt': 'b' });
    const suggestion = async (out: string): Promise<{ cfg: ReturnType<typeof workspace>; exclude: string[] }> => {
      const cfg = workspace({ handler: { command: COPY }, source: { directory: ws.source }, output: { directory: path.join(ws.source, out) } });
      const v = await runCli(['validate', '-c', cfg.configPath]);
      expect(v.code, v.stderr).toBe(78);
      const exclude = JSON.parse(/source\.exclude: (\[.*\])$/.exec(v.stderr.trim())![1]!) as string[];
      configure(cfg, { source: { directory: ws.source, exclude } });
      const again = await runCli(['validate', '-c', cfg.configPath]);
      expect(again.code, again.stderr).toBe(0);
      return { cfg, exclude };
    };
    expect((await suggestion('res*')).exclude).toEqual(['res\\*/**']);
    const { cfg, exclude } = await suggestion('q?');
    expect(exclude).toEqual(['q\\?/**']);
    for (let i = 0; i < 2; i++) {
      const r = await runCli(['run', '-c', cfg.configPath]);
      expect(r.code, r.stderr).toBe(0);
      expect(finished(r)?.counts).toMatchObject({ scanned: 2 });
    }
    expect(readdirSync(path.join(ws.source, 'q?', 'qa')).sort()).toEqual(['b.txt.out']);
  });

  // A bind mount (or a volume's subPath) puts output.directory inside the source under
  // another path: neither the config check (real paths) nor the scan's by-name skip saw it,
  // and every run turned the last run's outputs into items (a -> results/a.out -> ...).
  it.skipIf(process.getuid?.() !== 0)('mounted into it under another path (a bind mount): outputs never become items', async (ctx) => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a', 'results/.keep': '' });
    const out = path.join(ws.dir, 'bound-out');
    mkdirSync(out);
    if (spawnSync('mount', ['--bind', path.join(ws.source, 'results'), out]).status !== 0) ctx.skip();
    try {
      configure(ws, { output: { directory: out } });
      for (let run = 1; run <= 2; run++) {
        const r = await runCli(['run', '-c', ws.configPath]);
        expect(r.code, r.stderr).toBe(0);
      }
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
      expect(readdirSync(out).filter((f) => !f.startsWith('.')).sort()).toEqual(['a.txt.out']);
    } finally {
      spawnSync('umount', ['-l', out]);
    }
  });
});

describe('output.directory that is source.directory under another path', () => {
  // One volume mounted twice (two volumeMounts of one PVC, no subPath), or a bind mount:
  // real paths differ, so the config check let it through, and each run turned the last
  // run's outputs into items (a -> a.out -> a.out.out ...).
  it.skipIf(process.getuid?.() !== 0)('(a bind mount of it): validate and run exit 78 naming output.directory, nothing runs', async (ctx) => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a' });
    mkdirSync(ws.out);
    if (spawnSync('mount', ['--bind', ws.source, ws.out]).status !== 0) ctx.skip();
    try {
      for (const cmd of ['validate', 'run']) {
        const r = await runCli([cmd, '-c', ws.configPath]);
        expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
        expect(r.stderr).toMatch(/output\.directory/);
        expect(r.stderr).toMatch(/is source\.directory itself/);
      }
      expect(readdirSync(ws.source)).toEqual(['a.txt']);
    } finally {
      spawnSync('umount', ['-l', ws.out]);
    }
  });
});

describe("a symbolic link in the source to one of cronsafe's own files", () => {
  // A link to a file is an item (its handler reads the target): one to the live ledger or
  // the lock handed it to a handler, which a handler that appends to or rewrites its input
  // in place would corrupt.
  it('to the ledger or the lock: never an item', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'a.txt': 'a' });
    const first = await runCli(['run', '-c', ws.configPath]);
    expect(first.code, first.stderr).toBe(0);
    symlinkSync(ws.db, path.join(ws.source, 'ledger-link'));
    symlinkSync(path.join(path.dirname(ws.db), 'cronsafe.lock'), path.join(ws.source, 'lock-link'));
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)?.counts).toMatchObject({ scanned: 1 });
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
  });
});

describe('source.directory inside output.directory', () => {
  it('an id that mirrors the source\'s place writes beside it (`source~/`), never into the source: no input overwritten, no output an item', async () => {
    // output.directory is the workspace, source.directory its `source/`: the output of item
    // `source/x` was `<out>/source/x.out`, which is the source's own file `x.out`.
    const ws = workspace({ handler: { command: COPY } }, { 'source/x': 'the item x', 'x.out': 'an input, not an output' });
    configure(ws, { output: { directory: ws.dir } });

    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(path.join(ws.source, 'x.out'), 'utf8')).toBe('an input, not an output');
    expect(readFileSync(path.join(ws.dir, 'source~', 'x.out'), 'utf8')).toMatch(/^the item x\n--cronsafe-test-footer/);
    expect(readFileSync(path.join(ws.dir, 'x.out.out'), 'utf8')).toMatch(/^an input, not an output\n--cronsafe-test-footer/);

    const again = await runCli(['run', '-c', ws.configPath]);
    expect(again.code, again.stderr).toBe(0);
    expect(finished(again)?.counts).toMatchObject({ scanned: 2, claimed: 0 });
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
  });
});
