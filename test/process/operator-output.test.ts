import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import { CLI, FIXTURES, statusJson, workspace, type Workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

/**
 * Operator commands piped to a slow reader: the output is complete and valid, or the exit
 * is non-zero. The reader takes nothing until the CLI has exited or 1.5 s have passed, so
 * a CLI that exits with output still queued is caught every time.
 */
const T0 = Date.UTC(2026, 0, 1);
const DEAD = 100_500;
const BATCH = 128; // one result batch of the runner: the items that share a deadAt

/** Fill a ledger with `n` dead items, `BATCH` per deadAt, oldest first. */
async function deadLedger(ws: Workspace, n: number, error: (i: number) => string): Promise<void> {
  const ledger = await openSqliteLedger(ws.db);
  try {
    const retry = { maxAttempts: 1, backoffMs: 0, backoffMaxMs: 0 };
    for (let start = 0, b = 0; start < n; start += BATCH, b++) {
      const now = T0 + b * 1000;
      const ids = Array.from({ length: Math.min(BATCH, n - start) }, (_, i) => ({ id: `dir/item-${String(start + i).padStart(7, '0')}.scc` }));
      const claimable = await ledger.discover(ids, { runId: 'seed', now });
      const claims = await ledger.claim(claimable, { owner: 'seed', runId: 'seed', now, leaseMs: 60_000 });
      await ledger.fail(claims.map((c) => ({ claim: c, error: error(Number(c.id.slice(9, 16))) })), { now, retry });
    }
  } finally {
    await ledger.close();
  }
}

interface Piped {
  code: number | null;
  stderr: string;
  output: string;
}

/** Run the CLI with its stdout into a reader that starts reading only later. */
async function throughLateReader(args: string[], file: string): Promise<Piped> {
  const reader = spawn(process.execPath, [path.join(FIXTURES, 'process/late-reader.mjs'), file], { stdio: ['pipe', 'ignore', 'pipe'] });
  const readerExit = new Promise((resolve) => reader.on('exit', resolve));
  await new Promise<void>((resolve, reject) => {
    reader.stderr.setEncoding('utf8').on('data', (c: string) => c.includes('READY') && resolve());
    void readerExit.then(() => reject(new Error('reader exited early')));
  });
  const cli = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', reader.stdin, 'pipe'] });
  reader.stdin.destroy(); // the CLI holds the only write end: the reader sees EOF when it exits
  let stderr = '';
  cli.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const hard = setTimeout(() => cli.kill('SIGKILL'), 120_000);
  const start = setTimeout(() => reader.kill('SIGUSR1'), 1500);
  const code = await new Promise<number | null>((resolve) => cli.on('exit', (c) => resolve(c)));
  clearTimeout(hard);
  clearTimeout(start);
  reader.kill('SIGUSR1');
  await readerExit;
  return { code, stderr, output: readFileSync(file, 'utf8') };
}

describe(`dead-letter list and status through a slow pipe (${DEAD} dead items)`, () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = workspace({ handler: { command: ['true'] } });
    await deadLedger(ws, DEAD, (i) => `exit code 1: caption ${i} has no cue at line ${i % 977}`);
  }, 120_000);

  it('--json: one complete, valid JSON array, oldest first', async () => {
    const r = await throughLateReader(['dead-letter', 'list', '-c', ws.configPath, '--json'], path.join(ws.dir, 'list.json'));
    expect(r.code, r.stderr).toBe(0);
    expect(r.output.length).toBeGreaterThan(65_536);
    const list = JSON.parse(r.output) as Array<{ id: string; attempts: number; lastError: string; deadAt: string }>;
    expect(list).toHaveLength(DEAD);
    expect(new Set(list.map((d) => d.id)).size).toBe(DEAD);
    expect(list[0]).toEqual({ id: 'dir/item-0000000.scc', attempts: 1, lastError: 'exit code 1: caption 0 has no cue at line 0', deadAt: new Date(T0).toISOString() });
    expect(list.at(-1)!.id).toBe(`dir/item-${String(DEAD - 1).padStart(7, '0')}.scc`);
  }, 150_000);

  it('text: one line per dead item', async () => {
    const r = await throughLateReader(['dead-letter', 'list', '-c', ws.configPath], path.join(ws.dir, 'list.txt'));
    expect(r.code, r.stderr).toBe(0);
    const lines = r.output.split('\n');
    expect(lines.pop()).toBe('');
    expect(lines).toHaveLength(DEAD);
    // As stored, so that it can be pasted into `dead-letter retry`.
    expect(lines[1]).toBe('dir/item-0000001.scc\tattempts 1\texit code 1: caption 1 has no cue at line 1');
  }, 150_000);

  it('--limit and --since choose the oldest items from an instant on', async () => {
    const since = new Date(T0 + 3 * 1000).toISOString(); // the 4th batch on
    const r = await throughLateReader(['dead-letter', 'list', '-c', ws.configPath, '--json', '--since', since, '--limit', '200'], path.join(ws.dir, 'since.json'));
    expect(r.code, r.stderr).toBe(0);
    const list = JSON.parse(r.output) as Array<{ id: string }>;
    expect(list.map((d) => d.id)).toEqual(Array.from({ length: 200 }, (_, i) => `dir/item-${String(3 * BATCH + i).padStart(7, '0')}.scc`));
  }, 60_000);

  it('a reader that leaves early (| head -c 1000) gives a non-zero exit, never a silent 0', async () => {
    const head = spawn('head', ['-c', '1000'], { stdio: ['pipe', 'pipe', 'ignore'] });
    let got = 0;
    head.stdout.on('data', (c: Buffer) => (got += c.length));
    const cli = spawn(process.execPath, [CLI, 'dead-letter', 'list', '-c', ws.configPath, '--json'], { stdio: ['ignore', head.stdin, 'pipe'] });
    head.stdin.destroy();
    let stderr = '';
    cli.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const hard = setTimeout(() => cli.kill('SIGKILL'), 60_000);
    const code = await new Promise<number | null>((resolve) => cli.on('exit', (c) => resolve(c)));
    clearTimeout(hard);
    expect(got).toBe(1000);
    expect(code).toBe(1);
    expect(stderr).toMatch(/output incomplete: stdout was closed before everything was written \(EPIPE\)/);
  }, 90_000);

  it('Ctrl-C while it writes into a file (written synchronously, as a terminal is) ends it at once: 130, the listing cut (before: every line first)', async () => {
    const file = path.join(ws.dir, 'interrupted.txt');
    const fd = openSync(file, 'w');
    const cli = spawn(process.execPath, [CLI, 'dead-letter', 'list', '-c', ws.configPath], { stdio: ['ignore', fd, 'pipe'] });
    closeSync(fd);
    const hard = setTimeout(() => cli.kill('SIGKILL'), 60_000);
    const exited = new Promise<number | null>((resolve) => cli.on('exit', (c) => resolve(c)));
    await until(() => statSync(file).size > 0, 'the first lines of the listing');
    cli.kill('SIGINT');
    const code = await exited;
    clearTimeout(hard);
    expect(code).toBe(130);
    const lines = readFileSync(file, 'utf8').split('\n').length - 1;
    expect(lines).toBeGreaterThan(0);
    expect(lines).toBeLessThan(DEAD / 2);
  }, 90_000);
});

describe('status --json through a slow pipe', () => {
  it('is complete when the 20 dead letters it shows are large', async () => {
    // Last errors as large as handler.maxLogBytes allows: 1.2 MB, more than any pipe or socket buffer.
    const ws = workspace({ handler: { command: ['true'] } });
    await deadLedger(ws, 30, (i) => `stderr of caption ${i}: ${'x'.repeat(60_000)}`);
    const r = await throughLateReader(['status', '-c', ws.configPath, '--json'], path.join(ws.dir, 'status.json'));
    expect(r.code, r.stderr).toBe(0);
    expect(r.output.length).toBeGreaterThan(1_200_000);
    const report = JSON.parse(r.output) as { items: Record<string, number>; deadLetters: unknown[] };
    expect(report.items).toEqual({ pending: 0, claimed: 0, done: 0, dead: 30 });
    expect(report.deadLetters).toHaveLength(20);
  }, 60_000);
});

describe('validate, --help and --version into a reader that is gone or a full disk', () => {
  /** The CLI with stdout on a pipe whose reader is gone (closed before the CLI starts), or on /dev/full. */
  async function into(args: string[], stdout: 'closed-pipe' | 'dev-full'): Promise<{ code: number | null; stderr: string }> {
    const { openSync, closeSync } = await import('node:fs');
    const full = stdout === 'dev-full' ? openSync('/dev/full', 'w') : undefined;
    const cli = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', full ?? 'pipe', 'pipe'] });
    // Our end closed at once: node takes far longer to start than this to run.
    cli.stdout?.destroy();
    if (full !== undefined) closeSync(full);
    let stderr = '';
    cli.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const code = await new Promise<number | null>((resolve) => cli.on('exit', (c) => resolve(c)));
    return { code, stderr };
  }

  it.each([['validate'], ['--help'], ['--version']])('%s: exit 1 with the one "output incomplete" line, no stack trace', async (cmd) => {
    const ws = workspace({ handler: { command: ['true'] } });
    const args = cmd === 'validate' ? ['validate', '-c', ws.configPath] : [cmd];
    for (const where of ['closed-pipe', 'dev-full'] as const) {
      const r = await into(args, where);
      expect(r.code, `${where}: ${r.stderr}`).toBe(1);
      // A full disk is not a reader gone: it said "stdout was closed ... (ENOSPC)".
      expect(r.stderr, where).toMatch(
        where === 'closed-pipe'
          ? /^cronsafe: output incomplete: stdout was closed before everything was written \(EPIPE\)\n$/
          : /^cronsafe: output incomplete: stdout could not be written: no space left on its device \(ENOSPC\)\n$/,
      );
    }
  }, 60_000);
});

describe('run with its log on a full disk (`cronsafe run > file` on a full volume)', () => {
  // The ledger, not the log, is the run's record: a log stdout cannot take must not end the
  // pass. It died at its first log line with `fatal:` and a stack trace, leaving its run
  // "running" until the next run marked it died.
  // log.format: pretty too: pino-pretty writes through a pipeline of its own, whose error
  // never reached the stream cronsafe listened on, so the log vanished without the line.
  it.each(['json', 'pretty'] as const)('%s: carries on: every item done, exit 0, one line on stderr', async (format) => {
    const { openSync, closeSync } = await import('node:fs');
    const ws = workspace({ handler: { command: ['true'] }, log: { format } }, { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' });
    const full = openSync('/dev/full', 'w');
    const cli = spawn(process.execPath, [CLI, 'run', '-c', ws.configPath], { stdio: ['ignore', full, 'pipe'] });
    closeSync(full);
    let stderr = '';
    cli.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const code = await new Promise<number | null>((resolve) => cli.on('exit', (c) => resolve(c)));
    expect(code, stderr).toBe(0);
    expect(stderr).toBe('cronsafe: cannot write the log to stdout (ENOSPC); carrying on without it\n');
    const status = await statusJson(ws.configPath);
    expect(status.items).toEqual({ pending: 0, claimed: 0, done: 3, dead: 0 });
    expect((status.recentRuns as { outcome: string }[])[0]?.outcome).toBe('completed');
  }, 60_000);
});

describe('stderr on a full disk (2>/dev/full): the exit code still says what went wrong', () => {
  // The message is lost, but podFailurePolicy and scripts read the code: a bad config (78)
  // and a usage error (2) came out as 1, from the stderr write's unheard error event.
  it.each([
    ['a usage error', () => ['no-such-command'], 2],
    ['a bad config', (ws: Workspace) => ['validate', '-c', ws.configPath], 78],
    ['a missing config', () => ['status', '-c', '/nonexistent/cronsafe.yaml'], 78],
  ] as const)('%s', async (_what, args, want) => {
    const { openSync, closeSync } = await import('node:fs');
    const ws = workspace({ handler: { command: ['true'] }, concurrency: 0 });
    const full = openSync('/dev/full', 'w');
    const cli = spawn(process.execPath, [CLI, ...args(ws)], { stdio: ['ignore', 'ignore', full] });
    closeSync(full);
    const code = await new Promise<number | null>((resolve) => cli.on('exit', (c) => resolve(c)));
    expect(code).toBe(want);
  }, 30_000);
});
