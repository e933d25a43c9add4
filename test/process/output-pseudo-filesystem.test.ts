/**
 * An output.directory on a kernel pseudo file system (/proc, /sys): no output can ever be
 * written there. validate said OK; under /proc every run was `fatal:` and a stack trace
 * (ENOENT on mkdir of the temp directory, exit 1), under /sys a failed run (EPERM, exit 1).
 * Now both commands refuse the config (78) naming output.directory, as they refuse a path
 * that can never be a directory (a file, a loop of links).
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, configFile as writeConfig } from '../helpers/cli.js';

function configFile(output: string, extra = ''): string {
  const file = writeConfig(`name: caption-qc\nsource: {directory: ./source}\nhandler: {command: ["true"]}\noutput: {directory: ${output}}\n${extra}`);
  writeFileSync(path.join(path.dirname(file), 'source', 'a.txt'), 'a');
  return file;
}

describe('output.directory on a kernel pseudo file system', () => {
  it.each([
    ['/proc/self', 'proc'],
    ['/proc/self/not-there', 'proc'],
    ['/sys', 'sysfs'],
  ])('%s: validate and run exit 78 naming output.directory', async (output, type) => {
    const file = configFile(output);
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', file]);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toBe(
        `cronsafe: config error: ${file}: output.directory: ${output} is on ${type}, a file system the kernel makes up, where no output can be written: use a directory on a volume\n`,
      );
    }
  });

  // The same for what cronsafe writes beside the outputs: validate said OK (lock.path on 0x9fa0),
  // and every run failed (exit 1) taking the run lock.
  it.each([
    ['lock.path', 'lock: {path: /proc/self/job.lock}', '/proc/self/job.lock', 'lock file'],
    ['state.sqlite', 'state: {sqlite: /sys/job.db}\nlock: {path: ./job.lock}', '/sys/job.db', 'ledger'],
  ])('%s on a pseudo file system: validate and run exit 78 naming it', async (key, extra, shown, what) => {
    const file = configFile('./out', `${extra}\n`);
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', file]);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(`${file}: ${key}: ${shown} is on ${shown.startsWith('/proc') ? 'proc' : 'sysfs'}, a file system the kernel makes up, where no ${what} can be written`);
    }
  });

  // The commands that read or edit the ledger without a run said "no ledger file at ...: no
  // run has created it yet (check state.sqlite)" (exit 1), as if a run could make one there.
  it.each([
    ['/proc/cronsafe/job.db', 'proc'],
    ['/sys/job.db', 'sysfs'],
  ])('state.sqlite %s: status, dead-letter, requeue, plan and schedule exit 78 with the line run gives', async (ledger, type) => {
    // A schedule, for `cronsafe schedule`: it said when the job last ran ("-") and exited 0.
    const file = configFile('./out', `state: {sqlite: ${ledger}}\nlock: {path: ./job.lock}\nschedule: {cron: '0 * * * *'}\n`);
    const line = `${file}: state.sqlite: ${ledger} is on ${type}, a file system the kernel makes up, where no ledger can be written: use a directory on a volume`;
    const run = await runCli(['run', '-c', file]);
    expect(run.code, run.stderr).toBe(78);
    expect(run.stderr).toContain(line);
    for (const cmd of [['status'], ['status', '--json'], ['dead-letter', 'list'], ['dead-letter', 'retry', '--all'], ['requeue', '--all'], ['plan'], ['schedule'], ['schedule', '--json'], ['schedule', '--daemon']]) {
      const r = await runCli([...cmd, '-c', file]);
      expect(r.code, `${cmd.join(' ')}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toBe(`cronsafe: config error: ${line}\n`);
    }
  });
});
