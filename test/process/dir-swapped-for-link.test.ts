import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, finished, runCli, statusJson, workspace } from '../helpers/cli.js';

// Whichever item runs first replaces the other's directory by a link to a directory outside
// the source holding a file of the same name. The scan follows no directory link, so that
// file is no item: the second item must be forgotten as gone, not handed to its handler,
// which would read (and here copy into output.directory) a file from outside the source.
describe('a subdirectory of the source replaced by a link to elsewhere between scan and attempt', () => {
  it('is not followed: its item is forgotten as gone, nothing outside the source is read', async () => {
    const ws = workspace({}, { 'a/x': 'A', 'b/x': 'B' });
    const outside = path.join(ws.dir, 'outside');
    mkdirSync(outside);
    writeFileSync(path.join(outside, 'x'), 'SECRET');
    const swap =
      'd=$(dirname "$0"); s=$(dirname "$d"); o=$s/$([ "$(basename "$d")" = a ] && echo b || echo a); ' +
      `[ -L "$o" ] || [ -L "$d" ] || { mv "$o" "${ws.dir}/moved"; ln -s "${outside}" "$o"; }; cat -- "$0" > "$1"`;
    configure(ws, { handler: { command: ['sh', '-c', swap, '{path}', '{output}'] }, concurrency: 1 });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    const outputs = ['a/x.out', 'b/x.out'].filter((f) => existsSync(path.join(ws.out, f))).map((f) => readFileSync(path.join(ws.out, f), 'utf8'));
    expect(outputs).not.toContain('SECRET');
    expect(outputs).toHaveLength(1);
    const counts = finished(r)?.counts as Record<string, number>;
    expect(counts.failed).toBe(0);
    expect(counts.gone).toBe(1);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
  });

  // The source's real path is taken at the start to compare each nested item's with; read as
  // a string, a name on it that is not UTF-8 became U+FFFD, and no nested item matched.
  it('a source reached through a link to a directory whose name is not UTF-8: its nested items run', async () => {
    const ws = workspace({});
    const real = Buffer.concat([Buffer.from(`${ws.dir}/real`), Buffer.from([0xff])]);
    mkdirSync(Buffer.concat([real, Buffer.from('/sub')]), { recursive: true });
    writeFileSync(Buffer.concat([real, Buffer.from('/sub/x')]), 'X');
    const link = path.join(ws.dir, 'through-link');
    symlinkSync(real, link);
    configure(ws, { source: { directory: link }, handler: { command: ['sh', '-c', 'cat -- "$0" > "$1"', '{path}', '{output}'] } });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect((finished(r)?.counts as Record<string, number>).gone).toBe(0);
    expect(readFileSync(path.join(ws.out, 'sub/x.out'), 'utf8')).toBe('X');
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
  });

  // Each nested item's directory is compared with the source's real path taken at the start.
  // source.directory moved mid-run and a link to it left at its path (`mv queue /vol2/queue &&
  // ln -s /vol2/queue queue`) is the same directory (its identity is checked around every
  // attempt), yet every nested item left was dropped from the ledger as "gone: its file was
  // deleted", its history (attempts, backoff) with it, though each file was still there.
  it('source.directory moved and a link to it left at its path mid-run: its nested items run, none dropped as gone', async () => {
    const ws = workspace({}, { 'a/x': 'A', 'b/x': 'B', 'c/x': 'C' });
    const moved = `${ws.source}.moved`;
    const move = `[ -L "${ws.source}" ] || { mv "${ws.source}" "${moved}" && ln -s "${moved}" "${ws.source}"; }; cat -- "$0" > "$1"`;
    configure(ws, { handler: { command: ['sh', '-c', move, '{path}', '{output}'] }, concurrency: 1 });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(moved), 'the move was made').toBe(true);
    expect(r.lines.filter((l) => l.msg.startsWith('item gone')).map((l) => l.itemId)).toEqual([]);
    for (const d of ['a', 'b', 'c']) expect(readFileSync(path.join(ws.out, `${d}/x.out`), 'utf8')).toBe(d.toUpperCase());
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 3, dead: 0 });
  });
});
