import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { finished, spawnCli } from '../helpers/cli.js';
import { filesIn, until } from '../helpers/wait.js';

/**
 * One config copied to two directories, as is: the same name and source.directory, no
 * output.directory (the handler writes elsewhere), no state, so each copy has its own
 * default ledger (<config dir>/.cronsafe/<name>.db) and its own run lock. Nothing told the
 * two apart: started together, each ran every item, side by side, with no word.
 */
describe('one config copied to two directories, without output.directory', () => {
  it('a second start while the first runs exits 78 naming `name` and the source, and runs nothing', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'cronsafe-copy-'));
    const source = path.join(root, 'queue');
    mkdirSync(source);
    for (const id of ['a.txt', 'b.txt', 'c.txt']) writeFileSync(path.join(source, id), id);
    const started = path.join(root, 'started');
    mkdirSync(started);
    const gate = path.join(root, 'gate');
    const handler = path.join(root, 'gated.sh');
    // Each start leaves a file named after the attempt's id and pid; then waits for the gate.
    writeFileSync(handler, `#!/bin/sh\ntouch "${started}/$1.$$"\nwhile [ ! -e "${gate}" ]; do sleep 0.05; done\n`, { mode: 0o755 });
    const config = YAML.stringify({ name: 'copied', source: { directory: source }, handler: { command: [handler, '{id}'] }, log: { level: 'info' } });
    const copies = ['one', 'two'].map((d) => {
      mkdirSync(path.join(root, d));
      writeFileSync(path.join(root, d, 'cronsafe.yaml'), config);
      return path.join(root, d, 'cronsafe.yaml');
    });

    const first = spawnCli(['run', '-c', copies[0] ?? ''], { timeoutMs: 120_000 });
    await until(() => filesIn(started).length === 3, 'the first copy running all three items', 60_000);

    // Before the fix the second copy started the same items: the gate opens either way, so
    // a failing run leaves no handler waiting.
    const second = spawnCli(['run', '-c', copies[1] ?? ''], { timeoutMs: 120_000 });
    let secondExited = false;
    void second.exited.then(() => (secondExited = true));
    try {
      await until(() => secondExited || filesIn(started).length > 3, 'the second copy to exit (or to start an item)', 60_000);
    } finally {
      writeFileSync(gate, '');
    }
    expect((await second.exited).code, second.stderr()).toBe(78);
    expect(second.stderr()).toMatch(/two[/]cronsafe\.yaml: name: another run of a job named "copied" is processing source\.directory .*queue now, from another ledger.* give each its own name/);
    expect(finished(second)).toMatchObject({ outcome: 'failed', exitCode: 78 });

    expect((await first.exited).code, first.stderr()).toBe(0);
    // Before: the second copy ran a.txt, b.txt and c.txt again beside the first (6 starts).
    expect(readdirSync(started).map((f) => f.split('.').slice(0, 2).join('.')).sort()).toEqual(['a.txt', 'b.txt', 'c.txt']);
  }, 180_000);
});
