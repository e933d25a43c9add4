import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, runCli, statusJson, workspace } from '../helpers/cli.js';

// A handler (or anything else running beside it) that moves the directory of its {output}
// away and puts a link to a directory outside output.directory in its place, holding a file
// of the temp file's name. The commit's rename went through the link: the file outside was
// moved into output.directory as the item's output (cronsafe deleting it where it was), and
// a failed attempt's clean-up deleted it there. Now the swap is seen before either: the
// pass stops, nothing charged, and nothing outside is touched.
describe("cronsafe's temp directory swapped for a link by the handler during its attempt", () => {
  const swap = (outside: string): string =>
    `d=$(dirname "$1"); mv "$d" "$d.moved"; echo OUTSIDE > "${outside}/$(basename "$1")"; ln -s "${outside}" "$d"; exit "$0"`;

  for (const exit of [0, 1]) {
    it(`exit ${exit}: the file in the link's target is neither committed nor deleted; the pass stops, nothing charged`, async () => {
      const ws = workspace({}, { 'a.txt': 'a' });
      const outside = path.join(ws.dir, 'outside');
      mkdirSync(outside);
      writeFileSync(path.join(outside, 'keep'), 'keep');
      configure(ws, { handler: { command: ['sh', '-c', swap(outside), String(exit), '{output}'] } });
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toMatch(/symbolic link/);
      expect(existsSync(path.join(ws.out, 'a.txt.out'))).toBe(false);
      const names = readdirSync(outside).sort();
      expect(names).toHaveLength(2);
      const moved = names.find((n) => n !== 'keep')!;
      expect(readFileSync(path.join(outside, moved), 'utf8')).toBe('OUTSIDE\n');
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 1, claimed: 0, done: 0, dead: 0 });
    });
  }

  // An item whose name is not UTF-8 gets a link to it in `<temp name>.item` beside {output},
  // removed after the attempt: through the swapped directory, that removal deleted the
  // target's directory of that name, and all in it.
  it('an item whose name is not UTF-8: the directory of its link is not removed at the link target', async () => {
    const ws = workspace({});
    writeFileSync(Buffer.concat([Buffer.from(`${ws.source}/`), Buffer.from([0xff]), Buffer.from('.txt')]), 'x');
    const outside = path.join(ws.dir, 'outside');
    mkdirSync(outside);
    const plant = `d=$(dirname "$0"); mv "$d" "$d.moved"; mkdir "${outside}/$(basename "$0").item"; echo KEEP > "${outside}/$(basename "$0").item/keep"; ln -s "${outside}" "$d"; exit 1`;
    configure(ws, { handler: { command: ['sh', '-c', plant, '{output}'] } });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(1);
    const [dir] = readdirSync(outside);
    expect(dir).toMatch(/\.tmp\.item$/);
    expect(readFileSync(path.join(outside, dir!, 'keep'), 'utf8')).toBe('KEEP\n');
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 1, claimed: 0, done: 0, dead: 0 });
  });
});
