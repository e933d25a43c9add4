import { spawn, spawnSync } from 'node:child_process';
import { closeSync, constants, existsSync, openSync, readFileSync, readSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, statusJson, workspace, type Workspace } from '../helpers/cli.js';
import { chownTree, NOBODY } from '../helpers/users.js';
import { until } from '../helpers/wait.js';

/**
 * `cronsafe run` whose stdout is a pipe that nobody reads for a while: a container runtime
 * whose log disk is full, `cronsafe run | less` left alone. Node writes to a pipe
 * synchronously, so the run froze inside write(2) once the pipe's 64 KiB were full: its
 * handlers stopped being called, a SIGTERM did not drain it within the grace period (the
 * kubelet's SIGKILL then charges every attempt in flight), and leases went unrenewed. The
 * pipe here is a FIFO (what containerd gives a container), its read end held open and not
 * read until the assertions are done.
 */

/** A module handler that fails every item with a long error (a ~400-byte warn line each) and counts its calls. */
function failingHandler(ws: Workspace, delayMs: number): string {
  const file = path.join(ws.dir, 'fail.mjs');
  const count = path.join(ws.dir, 'calls');
  writeFileSync(
    file,
    `import { appendFileSync } from 'node:fs';
export default async function fail() {
  appendFileSync(${JSON.stringify(count)}, 'x');
  ${delayMs > 0 ? `await new Promise((r) => setTimeout(r, ${delayMs}));` : ''}
  throw new Error('not this one: ' + 'x'.repeat(300));
}
`,
  );
  return file;
}

const calls = (ws: Workspace): number => (existsSync(path.join(ws.dir, 'calls')) ? readFileSync(path.join(ws.dir, 'calls')).length : 0);

interface Stalled {
  exited: Promise<number | null>;
  pid: number;
  stderr: () => string;
  /** Everything in the pipe, read until the CLI has exited (the pipe then has no writer). */
  readToEnd(): Promise<string>;
}

/**
 * Start `cronsafe run` with its stdout into a FIFO whose reader does not read. With `uid`,
 * cronsafe runs as that user and the FIFO is root's, mode 0600, as the pipe a container
 * runtime makes for a container whose image sets another USER.
 */
function runIntoStalledPipe(ws: Workspace, uid?: number): Stalled {
  const fifo = path.join(ws.dir, 'stdout.fifo');
  if (uid !== undefined) chownTree(ws.dir, uid);
  expect(spawnSync('mkfifo', ['-m', '600', fifo]).status).toBe(0);
  const readEnd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  const writeEnd = openSync(fifo, constants.O_WRONLY);
  const cli = spawn(process.execPath, [CLI, 'run', '-c', ws.configPath], { stdio: ['ignore', writeEnd, 'pipe'], ...(uid === undefined ? {} : { uid, gid: uid }) });
  closeSync(writeEnd);
  let stderr = '';
  cli.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const hard = setTimeout(() => cli.kill('SIGKILL'), 110_000);
  const exited = new Promise<number | null>((resolve) => cli.on('exit', (code) => (clearTimeout(hard), resolve(code))));
  return {
    exited,
    pid: cli.pid!,
    stderr: () => stderr,
    readToEnd: () => readToEnd(readEnd),
  };
}

/** Everything in a FIFO opened non-blocking, read until no writer is left (the CLI exited); closes it. */
async function readToEnd(readEnd: number): Promise<string> {
  const chunks: Buffer[] = [];
  const buf = Buffer.alloc(1 << 16);
  for (;;) {
    let n: number;
    try {
      n = readSync(readEnd, buf, 0, buf.length, null);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
      await new Promise((r) => setTimeout(r, 5)); // empty, and the CLI still holds the write end
      continue;
    }
    if (n === 0) break; // no writer left: the CLI exited
    chunks.push(Buffer.from(buf.subarray(0, n)));
  }
  closeSync(readEnd);
  return Buffer.concat(chunks).toString('utf8');
}

const files = (n: number): Record<string, string> => Object.fromEntries(Array.from({ length: n }, (_, i) => [`item-${String(i).padStart(4, '0')}.txt`, 'x']));

describe('a run whose log reader stops reading', () => {
  // The second: a pipe that cronsafe may not open again (/proc/self/fd/1: EACCES), the pipe
  // of a container whose image runs as a user other than root (this image's USER 65532).
  // It froze as before: fd 1 is then made non-blocking itself. Root only (run as nobody).
  const users: [string, number | undefined][] = [['as the pipe\'s owner', undefined]];
  if (process.getuid?.() === 0) users.push(['as another user than the pipe\'s (a container\'s USER)', NOBODY]);
  it.each(users)('goes on working, and a SIGTERM drains it within drain.gracePeriodSeconds (%s)', async (_, uid) => {
    const ws = workspace({ drain: { gracePeriodSeconds: 4, marginSeconds: 1 }, log: { level: 'info' } }, files(3000));
    writeFileSync(ws.configPath, readFileSync(ws.configPath, 'utf8') + `handler:\n  module: ${JSON.stringify(failingHandler(ws, 5))}\n`);
    const run = runIntoStalledPipe(ws, uid);
    // 600 warn lines of ~450 bytes: four times what the pipe holds. Frozen on its log, the
    // run never got past ~150.
    await until(() => calls(ws) >= 600, 'the handler called 600 times with nobody reading the log', 60_000);
    process.kill(run.pid, 'SIGTERM');
    const code = await run.exited;
    expect(code, run.stderr()).toBe(75);
    // Its results are in the ledger: no claim left to be taken back (and charged) later.
    const s = await statusJson(ws.configPath);
    expect(s.items.claimed).toBe(0);
    expect(s.items.pending).toBeGreaterThanOrEqual(600); // failed once each, due again after their backoff
    expect((s.items.done ?? 0) + (s.items.dead ?? 0)).toBe(0);
    // The lines the pipe took are whole JSON lines, in order, and some are there.
    const lines = (await run.readToEnd()).split('\n').filter((l) => l !== '');
    expect(lines.length).toBeGreaterThan(50);
    for (const l of lines) expect(() => JSON.parse(l) as unknown, l.slice(0, 80)).not.toThrow();
  }, 120_000);

  it('finishes its pass meanwhile, and exits once the reader has taken every line, `run finished` last', async () => {
    const ws = workspace({ log: { level: 'info' } }, files(400));
    writeFileSync(ws.configPath, readFileSync(ws.configPath, 'utf8') + `handler:\n  module: ${JSON.stringify(failingHandler(ws, 0))}\n`);
    const run = runIntoStalledPipe(ws);
    await until(() => calls(ws) >= 400, 'every item attempted with nobody reading the log', 60_000);
    // The pass is over (every failure recorded) while 400 lines of ~450 bytes wait to be read.
    await until(async () => (await statusJson(ws.configPath)).items.claimed === 0, 'every result in the ledger', 60_000);
    let exited = false;
    void run.exited.then(() => (exited = true));
    expect(exited).toBe(false); // still holding lines for the reader
    const lines = (await run.readToEnd()).split('\n').filter((l) => l !== '');
    expect(await run.exited, run.stderr()).toBe(0);
    // One line for each attempt, none dropped: 400, or more when a loaded machine made the
    // pass outlast the 30 s backoff and it tried some items again.
    expect(lines.filter((l) => l.includes('not this one')).length).toBe(calls(ws));
    expect(calls(ws)).toBeGreaterThanOrEqual(400);
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({ msg: 'run finished', outcome: 'completed' });
    expect(run.stderr()).toBe('');
  }, 120_000);
});


describe('a run whose stdout is a Unix socket that stops being read', () => {
  // A Node parent's `stdio: 'pipe'` (a socket pair: a test harness, a supervisor written in
  // Node), systemd's journal stream: the same freeze as a pipe's, once the socket's buffer
  // was full, since the log was written synchronously to anything but a pipe.
  // `pretty` too: `cronsafe run | less` with the format meant for people.
  it.each(['json', 'pretty'] as const)('goes on working, and a SIGTERM drains it within drain.gracePeriodSeconds (log.format: %s)', async (format) => {
    const ws = workspace({ drain: { gracePeriodSeconds: 4, marginSeconds: 1 }, log: { level: 'info', format } }, files(3000));
    writeFileSync(ws.configPath, readFileSync(ws.configPath, 'utf8') + `handler:\n  module: ${JSON.stringify(failingHandler(ws, 5))}\n`);
    const cli = spawn(process.execPath, [CLI, 'run', '-c', ws.configPath], { stdio: ['ignore', 'pipe', 'pipe'] });
    expect(spawnSync('stat', ['-L', '-c', '%F', `/proc/${cli.pid}/fd/1`], { encoding: 'utf8' }).stdout.trim()).toBe('socket');
    cli.stdout.pause(); // Node reads a little into the stream's buffer, then nothing more
    let stderr = '';
    cli.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const hard = setTimeout(() => cli.kill('SIGKILL'), 230_000);
    const exited = new Promise<number | null>((resolve) => cli.on('exit', (code) => (clearTimeout(hard), resolve(code))));
    // 1,500 warn lines of ~450 bytes: several times what the socket and the stream's buffer hold.
    // ~40 s at a load of 20; past 60 s at 30 (each call a line the run cannot write yet).
    await until(() => calls(ws) >= 1500, 'the handler called 1,500 times with nobody reading the log', 150_000);
    process.kill(cli.pid!, 'SIGTERM');
    const chunks: Buffer[] = [];
    cli.stdout.on('data', (c: Buffer) => chunks.push(c)).resume(); // read again, so the queued lines can go
    expect(await exited, stderr).toBe(75);
    const s = await statusJson(ws.configPath);
    expect(s.items.claimed).toBe(0);
    expect(s.items.pending).toBeGreaterThanOrEqual(1500);
    const lines = Buffer.concat(chunks).toString('utf8').split('\n').filter((l) => l !== '');
    if (format === 'json') for (const l of lines) expect(() => JSON.parse(l) as unknown, l.slice(0, 80)).not.toThrow();
    else expect(lines.filter((l) => /^\[[\d:.]+\] WARN/.test(l)).length).toBeGreaterThanOrEqual(1500);
    expect(lines.filter((l) => l.includes('not this one')).length).toBeGreaterThanOrEqual(1500);
  }, 240_000);
});

describe('a run whose stalled log reader made it drop lines (past 8 MiB)', () => {
  it('keeps `run finished`, the one line with its outcome, before the note of how many were dropped', async () => {
    const ws = workspace({ log: { level: 'info' } }, files(200));
    // 250 lines of 50 bytes an item, each logged (~190 bytes a line): 9.5 MB in all, past
    // the 8 MiB kept. Once full, the queue has less room left than `run finished` takes.
    const handler = path.join(ws.dir, 'print.sh');
    writeFileSync(handler, `#!/bin/sh\nhead -c 12500 /dev/zero | tr '\\0' a | fold -w 50\n`, { mode: 0o755 });
    writeFileSync(ws.configPath, readFileSync(ws.configPath, 'utf8') + `handler:\n  command: [${JSON.stringify(handler)}]\n`);
    const run = runIntoStalledPipe(ws);
    // The run has ended (its end in the ledger, `run finished` logged right after) with
    // nobody reading yet: the queue is full.
    const ended = async (): Promise<boolean> => {
      if (!existsSync(ws.db)) return false;
      // The file is there, still empty, while the run creates its ledger: status says "no
      // ledger ... yet" (exit 1) until it is made.
      const s = await statusJson(ws.configPath).catch((err: Error) => {
        if (err.message.includes('yet: the file is empty')) return undefined;
        throw err;
      });
      return (s?.recentRuns as { finishedAt: number | null }[] | undefined)?.[0]?.finishedAt != null;
    };
    await until(ended, 'the end of the run in the ledger', 60_000);
    const lines = (await run.readToEnd()).split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as { msg: string; outcome?: string; droppedLines?: number });
    expect(await run.exited, run.stderr()).toBe(0);
    expect(lines.at(-1)!.droppedLines).toBeGreaterThan(1000);
    expect(lines.at(-1)).toMatchObject({ job: 'test-job' }); // found by a search for the job's lines
    expect(lines.at(-2)).toMatchObject({ msg: 'run finished', outcome: 'completed' });
  }, 120_000);
});

describe('a module handler that prints to stdout', () => {
  it('has every line it printed in the pipe when the run exits (`cronsafe run | cat`)', async () => {
    const ws = workspace({ log: { level: 'info' } }, files(20));
    const handler = path.join(ws.dir, 'print.mjs');
    // 100 kB a line: more than the pipe holds, so Node still had lines waiting at the exit.
    writeFileSync(handler, `export default async function print() {\n  console.log('z'.repeat(100000));\n}\n`);
    writeFileSync(ws.configPath, readFileSync(ws.configPath, 'utf8') + `handler:\n  module: ${JSON.stringify(handler)}\n`);
    const run = runIntoStalledPipe(ws);
    const text = await run.readToEnd();
    expect(await run.exited, run.stderr()).toBe(0);
    // The log's own lines, whole, may fall between two writes of a long printed line.
    const log = text.match(/\{"level"[^\n]*\n/g) ?? [];
    expect(log.map((l) => (JSON.parse(l) as { msg: string }).msg)).toContain('run finished');
    const printed = text.replace(/\{"level"[^\n]*\n/g, '');
    expect(printed.length).toBe(20 * 100001);
    expect(printed === `${'z'.repeat(100000)}\n`.repeat(20), 'every printed line whole').toBe(true);
  }, 120_000);

  it('into a pipe nobody reads keeps at most 8 MiB of it waiting in memory, drops the rest and says how much', async () => {
    const ws = workspace({ log: { level: 'info' } }, files(300));
    const handler = path.join(ws.dir, 'print.mjs');
    const count = path.join(ws.dir, 'calls');
    // 100 kB a call, 30 MB in all: before, every byte waited in the run's memory for the reader.
    writeFileSync(handler, `import { appendFileSync } from 'node:fs';\nexport default async function print() {\n  console.log('z'.repeat(100000));\n  appendFileSync(${JSON.stringify(count)}, 'x');\n}\n`);
    writeFileSync(ws.configPath, readFileSync(ws.configPath, 'utf8') + `handler:\n  module: ${JSON.stringify(handler)}\n`);
    const run = runIntoStalledPipe(ws);
    await until(() => calls(ws) >= 300, 'every item printed with nobody reading', 60_000);
    const text = await run.readToEnd();
    expect(await run.exited, run.stderr()).toBe(0);
    const printed = text.replace(/\{"level"[^\n]*\n/g, '');
    expect(printed.length).toBeLessThan(10 * 1024 * 1024);
    expect(printed.length).toBeGreaterThan(7 * 1024 * 1024);
    const m = /cronsafe: stdout was not read for a while: (\d+) write\(s\) a module handler made to it \(console\.log\) were dropped/.exec(run.stderr());
    expect(m, run.stderr()).not.toBeNull();
    // Every write is either in the pipe, whole or cut at the exit's wait, or counted as dropped.
    expect(Number(m![1]) + (printed.match(/z+\n/g) ?? []).length).toBe(300);
    expect((await statusJson(ws.configPath)).items.done).toBe(300);
  }, 120_000);

  it('on stderr (console.error) into a pipe nobody reads: the same bound', async () => {
    const ws = workspace({ log: { level: 'info' } }, files(300));
    const handler = path.join(ws.dir, 'print.mjs');
    const count = path.join(ws.dir, 'calls');
    writeFileSync(handler, `import { appendFileSync } from 'node:fs';\nexport default async function print() {\n  console.error('z'.repeat(100000));\n  appendFileSync(${JSON.stringify(count)}, 'x');\n}\n`);
    writeFileSync(ws.configPath, readFileSync(ws.configPath, 'utf8') + `handler:\n  module: ${JSON.stringify(handler)}\n`);
    const fifo = path.join(ws.dir, 'stderr.fifo');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const readEnd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const writeEnd = openSync(fifo, constants.O_WRONLY);
    const cli = spawn(process.execPath, [CLI, 'run', '-c', ws.configPath], { stdio: ['ignore', 'ignore', writeEnd] });
    closeSync(writeEnd);
    const hard = setTimeout(() => cli.kill('SIGKILL'), 110_000);
    const exited = new Promise<number | null>((resolve) => cli.on('exit', (code) => (clearTimeout(hard), resolve(code))));
    await until(() => calls(ws) >= 300, 'every item printed with nobody reading', 60_000);
    const text = await readToEnd(readEnd);
    expect(await exited).toBe(0);
    expect(text.length).toBeLessThan(10 * 1024 * 1024);
    expect(text).toMatch(/cronsafe: stderr was not read for a while: \d+ write\(s\) a module handler made to it \(console\.error\) were dropped/);
    expect((await statusJson(ws.configPath)).items.done).toBe(300);
  }, 120_000);

  it('after the log reader left (`cronsafe run | head -1`) does not fail the run: every item done, exit 0, one line on stderr', async () => {
    const ws = workspace({ log: { level: 'info' } }, files(20));
    const gone = path.join(ws.dir, 'reader-gone');
    const handler = path.join(ws.dir, 'print.mjs');
    // Each attempt waits until the reader has left, then prints as handler code does.
    writeFileSync(
      handler,
      `import { existsSync } from 'node:fs';
export default async function print(item) {
  while (!existsSync(${JSON.stringify(gone)})) await new Promise((r) => setTimeout(r, 5));
  console.log('done with ' + item.id);
}
`,
    );
    writeFileSync(ws.configPath, readFileSync(ws.configPath, 'utf8') + `handler:\n  module: ${JSON.stringify(handler)}\n`);
    const fifo = path.join(ws.dir, 'stdout.fifo');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const readEnd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const writeEnd = openSync(fifo, constants.O_WRONLY);
    const cli = spawn(process.execPath, [CLI, 'run', '-c', ws.configPath], { stdio: ['ignore', writeEnd, 'pipe'] });
    closeSync(writeEnd);
    let stderr = '';
    cli.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const hard = setTimeout(() => cli.kill('SIGKILL'), 110_000);
    const exited = new Promise<number | null>((resolve) => cli.on('exit', (code) => (clearTimeout(hard), resolve(code))));
    // The reader takes the first line, as `head -1` does, and leaves.
    let first = '';
    const buf = Buffer.alloc(1 << 16);
    await until(() => {
      try {
        first += buf.toString('utf8', 0, readSync(readEnd, buf, 0, buf.length, null));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
      }
      return first.includes('\n');
    }, 'the first log line');
    closeSync(readEnd);
    writeFileSync(gone, '');
    expect(await exited, stderr).toBe(0);
    expect(stderr).toBe('cronsafe: cannot write the log to stdout (EPIPE); carrying on without it\n');
    const s = await statusJson(ws.configPath);
    expect(s.items.done).toBe(20);
  }, 120_000);
});
