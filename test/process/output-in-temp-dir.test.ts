/**
 * A job whose output.directory is inside another job's `<out>/.cronsafe-tmp` (cronsafe's own
 * directory there): the other job's start-up empties its `job-<name>` directory, so this
 * job's output of an item `job-<name>/x`, written there, was deleted while its ledger said
 * done; validate said OK. Now a config error naming output.directory (exit 78), nothing run.
 */
import { existsSync, mkdirSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, finished, runCli, workspace } from '../helpers/cli.js';

describe("output.directory inside another job's .cronsafe-tmp", () => {
  it.each([
    ['the temp directory itself', (out: string) => path.join(out, '.cronsafe-tmp')],
    ['a directory below it', (out: string) => path.join(out, '.cronsafe-tmp', 'results')],
    ['reached through a link', (out: string, dir: string) => {
      const link = path.join(dir, 'results-link');
      symlinkSync(path.join(out, '.cronsafe-tmp'), link);
      return link;
    }],
  ])('%s: validate and run exit 78 naming output.directory; the other job keeps its outputs', async (_what, outputOf) => {
    // The other job: its run made <out>/.cronsafe-tmp/job-test-job.
    const other = workspace({ handler: { command: ['sh', '-c', 'cat -- "$0" > "$1"', '{path}', '{output}'] } }, { a: 'A' });
    const first = await runCli(['run', '-c', other.configPath]);
    expect(first.code, first.stderr).toBe(0);
    expect(existsSync(path.join(other.out, '.cronsafe-tmp', 'job-test-job'))).toBe(true);

    // This job: another name, its items under job-test-job/, its outputs in the other's temp directory.
    const ws = workspace({ name: 'second', handler: { command: ['sh', '-c', 'cat -- "$0" > "$1"', '{path}', '{output}'] } }, { 'job-test-job/x': 'X' });
    mkdirSync(ws.state, { recursive: true });
    const output = outputOf(other.out, ws.dir);
    configure(ws, { output: { directory: output } });

    const v = await runCli(['validate', '-c', ws.configPath]);
    expect(v.code, v.stdout).toBe(78);
    expect(v.stderr).toContain('output.directory');
    expect(v.stderr).toContain("cronsafe's own temp directory");
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(78);
    expect(finished(r)).toBeUndefined();
    expect(existsSync(path.join(other.out, '.cronsafe-tmp', 'job-test-job', 'x.out'))).toBe(false);
  });

  // Its files are the other job's attempts' temp files, half written: they were items.
  it('source.directory there: validate exits 78 naming source.directory', async () => {
    const other = workspace({ handler: { command: ['true'] } }, { a: 'A' });
    const first = await runCli(['run', '-c', other.configPath]);
    expect(first.code, first.stderr).toBe(0);
    const ws = workspace({ name: 'second', handler: { command: ['true'] } });
    configure(ws, { source: { directory: path.join(other.out, '.cronsafe-tmp') } });
    const v = await runCli(['validate', '-c', ws.configPath]);
    expect(v.code, v.stdout).toBe(78);
    expect(v.stderr).toContain('source.directory');
    expect(v.stderr).toContain("cronsafe's own temp directory");
  });
});
