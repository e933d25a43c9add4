import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { finished, runCli, statusJson, workspace } from '../helpers/cli.js';

/**
 * A module handler that plays an empty-directory cleaner once: on item `b.txt` it removes
 * cronsafe's (empty) temp directory before writing its output, as a cron'd `find -empty
 * -delete` would between two attempts.
 */
const CLEANER = `import { rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
export default async function (item, ctx) {
  if (item.id === 'b.txt' && item.attempt === 1) rmdirSync(path.dirname(ctx.outputPath));
  writeFileSync(ctx.outputPath, 'ok ' + item.id);
}
`;

describe("cronsafe's temp directory removed mid-run", () => {
  it('is recreated: the items after it are processed, none is dead-lettered', async () => {
    const files = Object.fromEntries(['a', 'b', 'c', 'd', 'e', 'f'].map((n) => [`${n}.txt`, n]));
    const ws = workspace({ handler: { module: 'cleaner.mjs' }, concurrency: 1 }, files);
    writeFileSync(path.join(ws.dir, 'cleaner.mjs'), CLEANER);
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(path.join(ws.out, '.cronsafe-tmp'))).toBe(true);
    const done = readdirSync(ws.out).filter((f) => f.endsWith('.out'));
    // Before: every item after b.txt failed too (ENOENT: the directory never came back).
    for (const n of ['c', 'd', 'e', 'f']) expect(done).toContain(`${n}.txt.out`);
    const items = (await statusJson(ws.configPath)).items;
    expect(items.dead).toBe(0);
    expect(items.done).toBeGreaterThanOrEqual(5);
    expect(finished(r)?.outcome).toBe('completed');
  });
});
