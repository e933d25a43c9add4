/**
 * A handler that leaves its output write-only for its owner (mode 0200: a `umask 0577`,
 * `install -m 0200`). cronsafe fsyncs the finished temp file before renaming it, and opened
 * it read-only to do so: refused (EACCES) for an unprivileged user, the attempt failed and
 * the item was charged, then dead-lettered, for an output the handler had finished. As an
 * unprivileged user: root ignores the modes.
 */
import { spawnSync } from 'node:child_process';
import { statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, statusJson, workspace, type Workspace } from '../helpers/cli.js';
import { NOBODY } from '../helpers/users.js';

const isRoot = process.getuid?.() === 0;
/** Run as nobody when root (whom the modes do not stop), else as ourselves. */
const as = isRoot ? { uid: NOBODY, gid: NOBODY } : {};

function owned(ws: Workspace): void {
  if (isRoot) expect(spawnSync('chown', ['-R', `${NOBODY}:${NOBODY}`, ws.dir]).status).toBe(0);
}

describe('a handler leaves its output write-only (mode 0200)', () => {
  it('command handler: the output is committed, the item done, nothing charged', async () => {
    const cmd = ['/bin/sh', '-c', 'umask 0577; cat -- "$1" > "$2"', 'sh', '{path}', '{output}'];
    const ws = workspace({ handler: { command: cmd }, retry: { maxAttempts: 1 } }, { 'a.txt': 'a\n', 'b.txt': 'b\n' });
    owned(ws);
    const r = await runCli(['run', '-c', ws.configPath], as);
    expect(r.code, r.stderr).toBe(0);
    // Before: both dead-lettered with "EACCES: permission denied, open '<out>/.cronsafe-tmp/...tmp'".
    expect(r.stderr).not.toMatch(/EACCES/);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
    const out = statSync(path.join(ws.out, 'a.txt.out'));
    expect(out.mode & 0o777).toBe(0o200);
    expect(out.size).toBe(2);
  });

  it('command handler that leaves its output with no rights at all (mode 000): committed with its mode, the item done, nothing charged', async () => {
    const cmd = ['/bin/sh', '-c', 'cat -- "$1" > "$2" && chmod 000 "$2"', 'sh', '{path}', '{output}'];
    const ws = workspace({ handler: { command: cmd }, retry: { maxAttempts: 1 } }, { 'a.txt': 'a\n' });
    owned(ws);
    const r = await runCli(['run', '-c', ws.configPath], as);
    expect(r.code, r.stderr).toBe(0);
    // Before: dead-lettered with "EACCES: permission denied, open '<out>/.cronsafe-tmp/...tmp'".
    expect(r.stderr).not.toMatch(/EACCES/);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
    const out = statSync(path.join(ws.out, 'a.txt.out'));
    expect(out.mode & 0o777).toBe(0o000);
    expect(out.size).toBe(2);
  });

  it('module handler: the same', async () => {
    const ws = workspace({}, { 'a.txt': 'a\n' });
    const mod = path.join(ws.dir, 'write-only.mjs');
    writeFileSync(mod, "import { readFile, writeFile } from 'node:fs/promises';\nexport default async (item, ctx) => writeFile(ctx.outputPath, await readFile(item.path), { mode: 0o200 });\n");
    const cfg = workspace({ handler: { module: mod }, retry: { maxAttempts: 1 }, source: { directory: ws.source }, output: { directory: ws.out } });
    owned(ws);
    owned(cfg);
    const r = await runCli(['run', '-c', cfg.configPath], as);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).not.toMatch(/EACCES/);
    expect((await statusJson(cfg.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
    expect(statSync(path.join(ws.out, 'a.txt.out')).mode & 0o777).toBe(0o200);
  });
});
