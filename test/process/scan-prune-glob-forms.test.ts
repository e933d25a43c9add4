import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, FIXTURES, finished, runCli, statusJson, workspace } from '../helpers/cli.js';

const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];

// The scan leaves out a directory no include glob can match into (globs.ts directoryFilter),
// reading each glob segment by segment. Three forms the matcher reads otherwise: a "!" that
// starts a segment mid-glob is a character of the name (picomatch negated the segment alone),
// a `|` outside a group splits the whole glob, and an id written exactly as the glob is
// taken as it is. Their files were matched, yet their directories never entered: the items
// were never processed, and nothing said so.
describe('include globs the scan must not prune away', () => {
  it('a/!*/x.txt, in/*.txt|*/deep/*.txt and {a,b}/x.txt: every file they match is processed', async () => {
    const files = { 'a/!z/x.txt': '1', 'q/deep/x.txt': '2', '{a,b}/x.txt': '3', 'in/k.txt': '4', 'other/x.txt': 'no' };
    const ws = workspace({ handler: { command: COPY } }, files);
    configure(ws, { source: { directory: ws.source, include: ['a/!*/x.txt', 'in/*.txt|*/deep/*.txt', '{a,b}/x.txt'] } });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)).toMatchObject({ outcome: 'completed', scan: 'complete' });
    expect(finished(r)?.counts).toMatchObject({ scanned: 4, succeeded: 4 });
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 4, dead: 0 });
  });
});
