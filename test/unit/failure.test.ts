/**
 * Who is to blame for a failed attempt (judgeFailure): real directories and files, so the
 * source and item checks are the ones a pass makes.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { judgeFailure, type FailedAttempt, type FailureScene } from '../../src/runner/failure.js';
import { EnvironmentFault, OwnDirectoryGone } from '../../src/runner/faults.js';
import { sourceIdentity } from '../../src/runner/scan.js';
import { HandlerFailure, KilledBySignal } from '../../src/runner/types.js';

let dir: string;
let src: string;
let file: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-failure-'));
  src = path.join(dir, 'src');
  mkdirSync(src);
  file = path.join(src, 'a.txt');
  writeFileSync(file, 'a');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const attempt = (over: Partial<FailedAttempt> = {}): FailedAttempt => ({
  err: new HandlerFailure('exit code 1: boom'),
  message: 'exit code 1: boom',
  aborted: false,
  tempGone: undefined,
  outputFull: false,
  itemPath: file,
  ...over,
});
const scene = (over: Partial<FailureScene> = {}): FailureScene => ({
  outputFullSeen: false,
  succeeded: false,
  outputDir: path.join(dir, 'out'),
  source: { directory: src, atStart: sourceIdentity(src) },
  ...over,
});

describe('judgeFailure', () => {
  it("charges the item's own failure, with its message", async () => {
    expect(await judgeFailure(attempt(), scene())).toEqual({ kind: 'charge', message: 'exit code 1: boom' });
  });

  it('hands back a handler killed by a stop signal while the run stops (systemd signals the whole cgroup); charges it otherwise', async () => {
    const killed = (sig: NodeJS.Signals) => ({ err: new KilledBySignal(`killed by ${sig}`, sig), message: `killed by ${sig}` });
    for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
      expect(await judgeFailure(attempt({ ...killed(sig), stopping: true }), scene())).toMatchObject({ kind: 'release' });
      expect(await judgeFailure(attempt({ ...killed(sig) }), scene())).toEqual({ kind: 'charge', message: `killed by ${sig}` });
    }
    // The item's own crashes, and the OOM killer's SIGKILL, are the item's even during a stop.
    for (const sig of ['SIGKILL', 'SIGSEGV', 'SIGABRT'] as const) {
      expect(await judgeFailure(attempt({ ...killed(sig), stopping: true }), scene())).toEqual({ kind: 'charge', message: `killed by ${sig}` });
    }
    // An exit code, even 143, is the handler's own answer.
    expect(await judgeFailure(attempt({ err: new HandlerFailure('exit code 143'), message: 'exit code 143', stopping: true }), scene())).toMatchObject({ kind: 'charge' });
  });

  it('hands back an interrupted attempt (a drain), whatever else is true', async () => {
    const v = await judgeFailure(attempt({ err: new HandlerFailure('interrupted: drain', true), message: 'interrupted: drain', outputFull: true }), scene());
    expect(v).toMatchObject({ kind: 'release', reason: 'interrupted: drain' });
    expect(await judgeFailure(attempt({ aborted: true }), scene())).toMatchObject({ kind: 'release' });
  });

  it("stops the pass for the environment's fault, and for one the temp clean-up found", async () => {
    const fault = new EnvironmentFault('handler.command program /x is missing');
    expect(await judgeFailure(attempt({ err: fault, message: fault.message }), scene())).toEqual({ kind: 'stop', reason: `not charged: ${fault.message}`, fault });
    const gone = new EnvironmentFault('output.directory is gone');
    expect(await judgeFailure(attempt({ tempGone: gone }), scene())).toMatchObject({ kind: 'stop', fault: gone });
  });

  it('once the pass saw the output file system full, a failure that says ENOSPC is that too; any other failure is still charged', async () => {
    const full = scene({ outputFullSeen: true });
    for (const message of ["exit code 1: head: error writing 'standard output': No space left on device", 'ENOSPC: no space left on device, write']) {
      expect(await judgeFailure(attempt({ message }), full), message).toMatchObject({ kind: 'stop', outputFull: true, reason: 'not charged: the output file system is full' });
      // Before any attempt saw it full, the words alone prove nothing (another file system, a bomb).
      expect(await judgeFailure(attempt({ message }), scene()), message).toMatchObject({ kind: 'charge' });
    }
    expect(await judgeFailure(attempt({ message: 'exit code 1: bad input' }), full)).toMatchObject({ kind: 'charge' });
  });

  it('hands back any failure judged once the pass stops for the environment; before such a stop it is charged', async () => {
    const stopping = scene({ environmentStop: 'the process limit (pids.max of the pod / ulimit -u) is reached: spawn sh EAGAIN' });
    const beside = attempt({ message: 'exit code 2: sh: 0: Cannot fork' });
    expect(await judgeFailure(beside, stopping)).toMatchObject({
      kind: 'release',
      reason: 'not charged: failed while the pass stopped for the environment (the process limit (pids.max of the pod / ulimit -u) is reached: spawn sh EAGAIN): exit code 2: sh: 0: Cannot fork',
    });
    // A bad item failing while nothing is wrong (no stop, or only a drain) is charged.
    expect(await judgeFailure(beside, scene())).toEqual({ kind: 'charge', message: 'exit code 2: sh: 0: Cannot fork' });
    expect(await judgeFailure({ ...beside, stopping: true }, scene())).toMatchObject({ kind: 'charge' });
    // The item's file gone is still "gone", not a hand-back.
    rmSync(file);
    expect(await judgeFailure(beside, stopping)).toEqual({ kind: 'gone' });
  });

  it('hands back an attempt whose temp directory vanished', async () => {
    expect(await judgeFailure(attempt({ tempGone: new OwnDirectoryGone('recreated') }), scene())).toMatchObject({ kind: 'release', reason: expect.stringMatching(/temp directory vanished/) });
    expect(await judgeFailure(attempt({ err: new OwnDirectoryGone('x') }), scene())).toMatchObject({ kind: 'release' });
  });

  it('stops for a full output file system only when there is an output directory', async () => {
    expect(await judgeFailure(attempt({ outputFull: true }), scene())).toMatchObject({ kind: 'stop', fault: { message: expect.stringMatching(/is full/) } });
    expect(await judgeFailure(attempt({ outputFull: true }), scene({ outputDir: undefined }))).toMatchObject({ kind: 'charge' });
  });

  it('stops when the source directory was replaced, forgets an item whose file is gone', async () => {
    const s = scene();
    rmSync(file);
    expect(await judgeFailure(attempt(), s)).toEqual({ kind: 'gone' });
    renameSync(src, path.join(dir, 'moved'));
    mkdirSync(src);
    expect(await judgeFailure(attempt(), s)).toMatchObject({ kind: 'stop', reason: 'not charged: source.directory is gone' });
  });

  it('forgets an item whose file was replaced by a directory or a FIFO since the scan (the scan no longer finds it)', async () => {
    rmSync(file);
    mkdirSync(file);
    expect(await judgeFailure(attempt({ message: "exit code 1: cp: -r not specified; omitting directory" }), scene())).toEqual({ kind: 'gone' });
    rmSync(file, { recursive: true });
    execFileSync('mkfifo', [file]);
    expect(await judgeFailure(attempt({ message: 'timed out after 300s' }), scene())).toEqual({ kind: 'gone' });
    // A link to a file is still an item (the scan follows it); a link to a directory is not.
    rmSync(file);
    writeFileSync(path.join(dir, 'target'), 't');
    symlinkSync(path.join(dir, 'target'), file);
    expect(await judgeFailure(attempt(), scene())).toMatchObject({ kind: 'charge' });
    rmSync(file);
    symlinkSync(dir, file);
    expect(await judgeFailure(attempt(), scene())).toEqual({ kind: 'gone' });
  });

  it('charges without looking at files when ids are not files (no scanned source)', async () => {
    rmSync(src, { recursive: true });
    expect(await judgeFailure(attempt(), scene({ source: undefined }))).toMatchObject({ kind: 'charge' });
  });
});
