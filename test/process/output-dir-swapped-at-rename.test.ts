/**
 * A directory below output.directory on an output's way, swapped for a link between
 * cronsafe's look at it (no link, a trusted owner) and the rename that moves the output in.
 * Node has no renameat, so the rename went through the link: the output was written outside
 * output.directory, over any file of that name there, and the item recorded done. The swap is
 * made at the rename itself here (a register module), the instant a racing owner of the
 * directory can hit: with a loop swapping `<out>/sub` for a link and back (renameat2
 * RENAME_EXCHANGE), 66 outputs of 3,200 attempts landed in the link's target. Such an owner is
 * trusted by design (cronsafe's own user, or output.directory's owner while cronsafe runs as
 * root), but the contract is that cronsafe never writes outside its own directories, links
 * included.
 *
 * The same swap as the next directory down is made (`sub/deeper/` for the item
 * `sub/deeper/a.txt`): that directory was made by path (mkdir follows a link on the way), an
 * empty `deeper` in the link's target, though the rename that followed refused the link.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, FIXTURES, runCli, spawnCliRaw, workspace } from '../helpers/cli.js';

describe("a directory on an output's way swapped for a link", () => {
  it.each([
    { at: 'at the rename', register: 'swap-before-rename-register.mjs', id: 'sub/a.txt', swapName: 'a.txt.out' },
    { at: 'as the next one down is made', register: 'swap-before-mkdir-register.mjs', id: 'sub/deeper/a.txt', swapName: 'deeper' },
  ])("$at: the output stays inside output.directory, nothing is made or written in the link's target", async ({ register, id, swapName }) => {
    const ws = workspace({ concurrency: 1, handler: { command: ['cp', '{path}', '{output}'] } }, { [id]: 'payload\n' });
    const victim = path.join(ws.dir, 'elsewhere');
    mkdirSync(victim);
    const run = spawnCliRaw(process.execPath, ['--import', path.join(FIXTURES, 'process', register), CLI, 'run', '-c', ws.configPath], {
      env: { SWAP_DIR: path.join(ws.out, 'sub'), SWAP_TO: victim, SWAP_NAME: swapName },
      timeoutMs: 60_000,
    });
    const { code } = await run.exited;
    expect(existsSync(path.join(ws.out, 'sub.aside')), `the swap was made: ${run.stderr()}`).toBe(true);
    expect(readdirSync(victim)).toEqual([]);
    // Made and renamed into the directory cronsafe held, wherever it is now: inside output.directory.
    expect(readFileSync(path.join(ws.out, `${id.replace(/^sub\//, 'sub.aside/')}.out`), 'utf8')).toBe('payload\n');
    expect(code, run.stderr()).toBe(0);
  }, 120_000);

  // The rename goes through `/proc/self/fd/N/<name>`; its error is told of the output's own
  // path, replaced in the message. With the path as a replacement string, a `$&` in an id (a
  // directory named `a$&b`) put the /proc path in the middle: the item's recorded error
  // named `<out>/a/proc/self/fd/31/x.txt.outb/x.txt.out`, a file that never was.
  it('a rename refused at an output below output.directory is recorded naming the output\'s path, whatever `$` its id holds', async () => {
    const id = 'a$&b/x.txt';
    // The handler runs in source.directory, beside output.directory: it makes a directory where
    // its output goes (EISDIR at the rename).
    const ws = workspace({ handler: { command: ['/bin/sh', '-c', 'cp "$1" "$2" && mkdir -p "../out/$CRONSAFE_ITEM_ID.out/kept"', 'sh', '{path}', '{output}'] } }, { [id]: 'payload\n' });
    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);
    const failed = run.lines.find((l) => l.msg === 'item failed; will retry');
    expect(failed?.error, JSON.stringify(run.lines.filter((l) => l.level !== 'debug'))).toMatch(/^EISDIR: /);
    expect(failed?.error).toContain(`-> '${path.join(ws.out, id)}.out'`);
    expect(failed?.error).not.toContain('/proc/self/fd');
  }, 120_000);
});
