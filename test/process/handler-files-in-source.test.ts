/**
 * A relative program or script in handler.command resolves against source.directory, so the
 * handler's own files sit among the items (`./qc.sh {path}`, `python3 qc.py {path}`), and so
 * may handler.module. They were items: the handler ran on its own script (an output for it,
 * or a dead letter that pages), and one that removes its input deleted its program, which
 * stopped that pass and every later run (exit 78). They are never items now.
 */
import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, finished, runCli, statusJson, workspace } from '../helpers/cli.js';

// Says what it got, then consumes (removes) its input, as a queue worker does.
const CONSUMER = '#!/bin/sh\necho "got $1" >&2\nrm -- "$1"\n';

describe("the handler's own files in source.directory are never items", () => {
  it('a program named by a relative path (./consume.sh) is not run on itself, nor removed; the next run works', async () => {
    const ws = workspace({ handler: { command: ['./consume.sh', '{path}'] }, output: undefined, concurrency: 1 }, { 'a.txt': 'a', 'b.txt': 'b' });
    const program = path.join(ws.source, 'consume.sh');
    writeFileSync(program, CONSUMER);
    chmodSync(program, 0o755);
    const r = await runCli(['run', '-c', ws.configPath]);
    // Before: consume.sh was an item: the handler removed it, and the pass stopped (exit 1).
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toContain('got ' + program);
    expect(finished(r)?.counts).toMatchObject({ scanned: 2, succeeded: 2 });
    expect(existsSync(program)).toBe(true);
    writeFileSync(path.join(ws.source, 'c.txt'), 'c');
    const again = await runCli(['run', '-c', ws.configPath]);
    expect(again.code, again.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 3, dead: 0 });
  });

  it("an interpreter's script named bare (sh consume.sh) and handler.module are not items either", async () => {
    const ws = workspace({ handler: { command: ['sh', 'consume.sh', '{path}'] }, output: undefined }, { 'a.txt': 'a' });
    writeFileSync(path.join(ws.source, 'consume.sh'), CONSUMER);
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)?.counts).toMatchObject({ scanned: 1, succeeded: 1 });
    expect(existsSync(path.join(ws.source, 'consume.sh'))).toBe(true);

    const mod = workspace({ output: undefined }, { 'a.txt': 'a' });
    const file = path.join(mod.source, 'handler.mjs');
    writeFileSync(file, "import { rm } from 'node:fs/promises';\nexport default async (item) => rm(item.path);\n");
    configure(mod, { handler: { module: file } });
    const m = await runCli(['run', '-c', mod.configPath]);
    expect(m.code, m.stderr).toBe(0);
    expect(finished(m)?.counts).toMatchObject({ scanned: 1, succeeded: 1 });
    expect(existsSync(file)).toBe(true);
  });
});
