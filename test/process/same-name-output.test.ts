import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, finished, runCli, spawnCli, workspace } from '../helpers/cli.js';
import { filesIn, until } from '../helpers/wait.js';

/**
 * Two configs of one name on two ledgers (a copy with only its source and state changed)
 * and one output directory. An exclusive run empties `.cronsafe-tmp/job-<name>` at its
 * start, which its own run lock makes safe; but that lock is its ledger's, so the copy's
 * start emptied the first job's live attempts' temp files, and each of those attempts was
 * charged for it (ENOENT at the rename into place).
 */
describe('two configs of one name sharing output.directory', () => {
  it("the second start while the first runs exits 78 naming `name`, and takes nothing from the first's attempts", async () => {
    const a = workspace({ name: 'same-name', concurrency: 2, log: { level: 'info' } }, { 'a1.txt': 'a1\n', 'a2.txt': 'a2\n' });
    const b = workspace({ name: 'same-name', log: { level: 'info' } }, { 'b1.txt': 'b1\n' });
    configure(b, { output: { directory: a.out }, handler: { command: ['cp', '{path}', '{output}'] } });
    const gate = path.join(a.dir, 'gate');
    const started = path.join(a.dir, 'started');
    mkdirSync(started);
    const handler = path.join(a.dir, 'gated-copy.sh');
    writeFileSync(handler, `#!/bin/sh\ntouch "${started}/$(basename "$1")"\nwhile [ ! -e "${gate}" ]; do sleep 0.05; done\ncp "$1" "$2"\n`, { mode: 0o755 });
    configure(a, { handler: { command: [handler, '{path}', '{output}'] } });

    const first = spawnCli(['run', '-c', a.configPath], { timeoutMs: 120_000 });
    await first.waitFor((l) => l.msg === 'run started', 30_000);
    await until(() => filesIn(started).length === 2, 'both attempts of the first job in flight', 60_000);

    const second = await runCli(['run', '-c', b.configPath]);
    expect(second.code, second.stderr).toBe(78);
    expect(second.stderr).toMatch(/cronsafe\.yaml: name: another run of a job named "same-name" is using output\.directory .* give each its own name/);
    expect(finished(second)).toMatchObject({ outcome: 'failed', exitCode: 78 });

    writeFileSync(gate, '');
    expect((await first.exited).code).toBe(0);
    // Before: the second start emptied the first's temp directory, and both attempts failed.
    expect(finished(first)?.counts).toMatchObject({ succeeded: 2, failed: 0 });
    expect(readdirSync(a.out).filter((f) => f.endsWith('.out')).sort()).toEqual(['a1.txt.out', 'a2.txt.out']);

    // Not overlapping, the second config runs (the shared name is still a mistake, but harmless then).
    const later = await runCli(['run', '-c', b.configPath]);
    expect(later.code, later.stderr).toBe(0);
    expect(readdirSync(a.out).filter((f) => f.endsWith('.out')).sort()).toEqual(['a1.txt.out', 'a2.txt.out', 'b1.txt.out']);
  }, 180_000);
  it('the first run still holds the temp directory after making it again (a cleaner removed it): the second start exits 78', async () => {
    const a = workspace({ name: 'same-name', concurrency: 1, log: { level: 'info' } }, { 'a1.txt': 'a1\n', 'a2.txt': 'a2\n' });
    const b = workspace({ name: 'same-name', log: { level: 'info' } }, { 'b1.txt': 'b1\n' });
    configure(b, { output: { directory: a.out }, handler: { command: ['cp', '{path}', '{output}'] } });
    // Attempt n (counted from 0) waits for the file gate-n.
    const started = path.join(a.dir, 'started');
    mkdirSync(started);
    const handler = path.join(a.dir, 'gated-copy.sh');
    writeFileSync(handler, `#!/bin/sh\nn=$(ls "${started}" | wc -l)\ntouch "${started}/$n"\nwhile [ ! -e "${a.dir}/gate-$n" ]; do sleep 0.05; done\ncp "$1" "$2"\n`, { mode: 0o755 });
    configure(a, { handler: { command: [handler, '{path}', '{output}'] } });
    const gate = (n: number): void => writeFileSync(path.join(a.dir, `gate-${n}`), '');

    const first = spawnCli(['run', '-c', a.configPath], { timeoutMs: 120_000 });
    await until(() => filesIn(started).length === 1, "the first job's first attempt in flight", 60_000);
    // An empty-directory cleaner: the attempt fails, and the run makes the directory again.
    rmSync(path.join(a.out, '.cronsafe-tmp', 'job-same-name'), { recursive: true });
    gate(0);
    await until(() => filesIn(started).length === 2, "the first job's next attempt in flight, in the directory made again", 60_000);

    const second = await runCli(['run', '-c', b.configPath]);
    expect(second.code, second.stderr).toBe(78);
    expect(second.stderr).toMatch(/name: another run of a job named "same-name" is using output\.directory/);

    for (let n = 1; n < 6; n++) gate(n);
    expect((await first.exited).code).toBe(0);
    expect(finished(first)?.counts).toMatchObject({ succeeded: 2, failed: 0 });
    expect(readdirSync(a.out).filter((f) => f.endsWith('.out')).sort()).toEqual(['a1.txt.out', 'a2.txt.out']);
  }, 180_000);
});
