import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, ROOT, runCli, statusJson, workspace } from '../helpers/cli.js';

const NAMES = [
  'with space.scc',
  "quote'single.scc",
  'quote"double.scc',
  '$(touch PWNED).scc',
  '`touch PWNED2`.scc',
  'semi;colon&amp.scc',
  'new\nline.scc',
  '日本語 é.scc',
  'literal {id} {path}.scc',
  'sub dir/nested $HOME.scc',
];

describe('file names reach the handler intact, never through a shell', () => {
  it('argv and env carry every name byte-for-byte', async () => {
    const ws = workspace(
      { handler: { command: [process.execPath, path.join(FIXTURES, 'process/argv-exec.mjs'), '{path}', '--id={id}', '{attempt}'] } },
      Object.fromEntries(NAMES.map((n) => [n, n])),
    );
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: NAMES.length, dead: 0 });
    for (const id of NAMES) {
      const got = JSON.parse(readFileSync(path.join(ws.out, `${id}.out`), 'utf8'));
      const abs = path.join(ws.source, id);
      expect(got.argv).toEqual([abs, `--id=${id}`, '1']);
      expect(got.env).toEqual({ id, path: abs, attempt: '1' });
    }
    for (const dir of [ws.source, ws.dir, ROOT]) {
      expect(existsSync(path.join(dir, 'PWNED'))).toBe(false);
      expect(existsSync(path.join(dir, 'PWNED2'))).toBe(false);
    }
  });
});
