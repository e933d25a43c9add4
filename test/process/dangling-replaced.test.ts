import { lstatSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { finished, runCli, statusJson, workspace } from '../helpers/cli.js';

// Whichever item runs first replaces the other's file by a dangling symbolic link: to the
// scan that is no item (it is forgotten as gone), so between scan and attempt it must be
// forgotten uncharged too, as a deleted file is, not handed to the handler and charged.
const SWAP = 'other=$(dirname "$0")/$([ "$(basename "$0")" = a ] && echo b || echo a); ' +
  '[ -L "$0" ] || [ -L "$other" ] || { rm -f "$other"; ln -s /nonexistent-cronsafe-target "$other"; }; cat -- "$0" > "$1"';

describe('a file replaced by a dangling link between scan and attempt', () => {
  it('is forgotten as gone, not charged', async () => {
    const ws = workspace({ handler: { command: ['sh', '-c', SWAP, '{path}', '{output}'] }, concurrency: 1 }, { a: 'A', b: 'B' });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(lstatSync(`${ws.source}/a`).isSymbolicLink() !== lstatSync(`${ws.source}/b`).isSymbolicLink()).toBe(true);
    const counts = finished(r)?.counts as Record<string, number>;
    expect(counts.failed).toBe(0);
    expect(counts.gone).toBe(1);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
  });
});
