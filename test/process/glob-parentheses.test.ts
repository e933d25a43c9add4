import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, FIXTURES, finished, runCli, workspace } from '../helpers/cli.js';

const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];

// Parentheses in names are common (`photo (1).jpg`, the copy a browser or a file manager
// makes). picomatch read a bare `(...)` in a glob as a regular expression's group, so an
// exclude written for those copies, `* (1).*`, left them in and left out `photo 1.jpg`, a
// real item, silently: it was never processed.
describe('parentheses in a glob are characters of the name (outside an extglob)', () => {
  it('exclude ["* (1).*"] leaves out photo (1).jpg, not photo 1.jpg', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'photo (1).jpg': 'copy', 'photo 1.jpg': 'one', 'photo.jpg': 'orig' });
    configure(ws, { source: { directory: ws.source, exclude: ['* (1).*'] } });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)?.counts).toMatchObject({ scanned: 2, succeeded: 2 });
    expect(existsSync(path.join(ws.out, 'photo 1.jpg.out'))).toBe(true);
    expect(existsSync(path.join(ws.out, 'photo.jpg.out'))).toBe(true);
    expect(existsSync(path.join(ws.out, 'photo (1).jpg.out'))).toBe(false);
  });

  it('an extglob and a group with "|" keep their meaning: +(a|b)/*, (a|b)/*', async () => {
    const ws = workspace({ handler: { command: COPY } }, { 'a/x': '1', 'b/x': '2', 'c/x': 'no' });
    configure(ws, { source: { directory: ws.source, include: ['+(a)/*', '(b|z)/*'] } });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)?.counts).toMatchObject({ scanned: 2, succeeded: 2 });
    expect(existsSync(path.join(ws.out, 'c/x.out'))).toBe(false);
  });
});
