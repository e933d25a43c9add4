import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Config, HandlerConfig } from '../../src/config/types.js';
import { whyProgramNotRun } from '../../src/config/program.js';
import { holdsLedgerSecret } from '../../src/config/secrets.js';
import { createExecHandler, expandArg } from '../../src/runner/handlers/exec.js';
import { EnvironmentFault } from '../../src/runner/faults.js';
import { redactor } from '../../src/redact.js';
import { HandlerFailure, type HandlerContext } from '../../src/runner/types.js';

const FIXTURES = fileURLToPath(new URL('../fixtures/handlers/', import.meta.url));
const fixture = (name: string): string => path.join(FIXTURES, name);
const NODE = process.execPath;

interface LogLine { level: number; msg: string; stream?: string; droppedBytes?: number }

/** A pino logger writing into memory, so tests can assert what `kubectl logs` would show. */
function memoryLogger() {
  const lines: LogLine[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString('utf8').split('\n')) if (l) lines.push(JSON.parse(l) as LogLine);
      cb();
    },
  });
  return { log: pino({ level: 'trace' }, sink), lines };
}

function handlerConfig(command: string[], over: Partial<HandlerConfig> = {}): HandlerConfig {
  return { command, timeoutSeconds: 20, killAfterSeconds: 1, maxLogBytes: 65536, env: {}, ...over };
}

/** Readiness: poll for a condition (a file appearing), bounded; never a bare sleep. */
async function waitFor(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Gone = no such process, or a zombie nobody has reaped yet (it runs no code). */
function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

async function failureOf(p: Promise<unknown>): Promise<HandlerFailure> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(HandlerFailure);
    return err as HandlerFailure;
  }
  throw new Error('expected the attempt to fail');
}

let dir: string;
let src: string;
const spawned: number[] = [];

beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-exec-'));
  src = path.join(dir, 'src');
  mkdirSync(src);
});
afterEach(() => {
  // Belt and braces: a failing test must not leave sleepers behind.
  for (const pid of spawned.splice(0)) {
    try { process.kill(pid, 'SIGKILL'); } catch { /* already gone */ }
  }
  rmSync(dir, { recursive: true, force: true });
});

function context(over: Partial<HandlerContext> = {}) {
  const { log, lines } = memoryLogger();
  const ctx: HandlerContext = { signal: new AbortController().signal, log, attempt: 2, outputPath: path.join(dir, 'out.tmp'), ...over };
  return { ctx, lines };
}

describe('expandArg', () => {
  it('substitutes in one pass, inside text, and leaves unknown braces', () => {
    const v = { path: '/s/{id}', id: 'a{attempt}', output: '/o', attempt: '3' };
    expect(expandArg('--in={path}', v)).toBe('--in=/s/{id}');
    expect(expandArg('{id}-{attempt}-{nope}', v)).toBe('a{attempt}-3-{nope}');
  });
});

describe('exec handler: arguments reach the child untouched', () => {
  const pwnedAbs = `/tmp/pwned-${randomBytes(6).toString('hex')}`;
  const pwnedRel = `pwned-${randomBytes(6).toString('hex')}`;
  const ids = [
    'with space.scc',
    "single'quote.scc",
    'double"quote.scc',
    `$(touch ${pwnedAbs})`, // a nested path whose full text is the substitution
    `\`touch ${pwnedRel}\`.scc`,
    `a; touch ${pwnedRel}; b.scc`,
    'line\nbreak.scc',
    'é 日本.scc',
    'lit {id} and {path}.scc',
  ];

  it.each(ids)('%j', async (id) => {
    const itemPath = path.join(src, id);
    mkdirSync(path.dirname(itemPath), { recursive: true });
    writeFileSync(itemPath, 'x');
    const record = path.join(dir, 'record.json');
    const handler = createExecHandler(
      handlerConfig([NODE, fixture('record-args.mjs'), '{path}', '--id={id}', '{output}', 'attempt-{attempt}', '{nope}'], {
        env: { RECORD_FILE: record, EXTRA: 'extra' },
      }),
      { sourceDir: src },
    );
    const { ctx } = context();
    await handler.run({ id, path: itemPath, attempt: 2 }, ctx);

    const got = JSON.parse(readFileSync(record, 'utf8')) as { argv: string[]; env: Record<string, string>; cwd: string };
    expect(got.argv).toEqual([itemPath, `--id=${id}`, ctx.outputPath, 'attempt-2', '{nope}']);
    expect(got.env).toEqual({
      CRONSAFE_ITEM_PATH: itemPath,
      CRONSAFE_ITEM_ID: id,
      CRONSAFE_OUTPUT_PATH: ctx.outputPath,
      CRONSAFE_ATTEMPT: '2',
      EXTRA: 'extra',
    });
    expect(got.cwd).toBe(src);
    expect(existsSync(pwnedAbs)).toBe(false);
    expect(existsSync(path.join(src, pwnedRel))).toBe(false);
  });

  it('has no CRONSAFE_OUTPUT_PATH without an output, even if cronsafe inherited one', async () => {
    const record = path.join(dir, 'record.json');
    process.env.CRONSAFE_OUTPUT_PATH = '/inherited';
    try {
      const handler = createExecHandler(handlerConfig([NODE, fixture('record-args.mjs')], { env: { RECORD_FILE: record } }), { sourceDir: src });
      const { ctx } = context({ outputPath: undefined });
      await handler.run({ id: 'a', path: path.join(src, 'a'), attempt: 1 }, ctx);
    } finally {
      delete process.env.CRONSAFE_OUTPUT_PATH;
    }
    const got = JSON.parse(readFileSync(record, 'utf8')) as { env: Record<string, string> };
    expect(got.env).not.toHaveProperty('CRONSAFE_OUTPUT_PATH');
  });

  it('a ledger password that is also its URL\'s user or database name (postgres:postgres) leaves USER=postgres and POSTGRES_DB=postgres to the handler; a URL holding it is withheld', async () => {
    const record = path.join(dir, 'record.json');
    const config = { state: { postgres: 'postgres://postgres:postgres@db:5432/postgres' } } as unknown as Config;
    const saved = { USER: process.env.USER, POSTGRES_DB: process.env.POSTGRES_DB, LEDGER_URL: process.env.LEDGER_URL };
    Object.assign(process.env, { USER: 'postgres', POSTGRES_DB: 'postgres', LEDGER_URL: config.state.postgres });
    try {
      const handler = createExecHandler(handlerConfig(['/bin/sh', '-c', 'env > "$RECORD_FILE"'], { env: { RECORD_FILE: record } }), { sourceDir: src, holdsLedgerSecret: holdsLedgerSecret(config) });
      const { ctx } = context({ outputPath: undefined });
      await handler.run({ id: 'a', path: path.join(src, 'a'), attempt: 1 }, ctx);
    } finally {
      for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k]; else process.env[k] = v;
    }
    const got = readFileSync(record, 'utf8').split('\n');
    // Before: both were deleted, as if they held the password.
    expect(got).toContain('USER=postgres');
    expect(got).toContain('POSTGRES_DB=postgres');
    expect(got.filter((l) => l.startsWith('LEDGER_URL='))).toEqual([]);
  });

  it('fails an attempt that needs {output} when there is no output directory', async () => {
    const handler = createExecHandler(handlerConfig([NODE, fixture('record-args.mjs'), '{output}']), { sourceDir: src });
    const { ctx } = context({ outputPath: undefined });
    const f = await failureOf(handler.run({ id: 'a', path: path.join(src, 'a'), attempt: 1 }, ctx));
    expect(f.message).toMatch(/\{output\}.*output\.directory/);
  });
});

describe('exec handler: outcomes', () => {
  const item = () => ({ id: 'a.scc', path: path.join(src, 'a.scc'), attempt: 1 });

  it('reports the exit code with the stderr tail', async () => {
    const handler = createExecHandler(handlerConfig([NODE, fixture('exit-code.mjs'), '3', 'boom: bad frame rate\n']), { sourceDir: src });
    const f = await failureOf(handler.run(item(), context().ctx));
    expect(f.message).toBe('exit code 3: boom: bad frame rate');
    expect(f.interrupted).toBe(false);
  });

  it('keeps only the last ~2 KB of stderr in the message', async () => {
    const noise = 'n'.repeat(10_000) + '\nTHE END\n';
    const handler = createExecHandler(handlerConfig([NODE, fixture('exit-code.mjs'), '1', noise]), { sourceDir: src });
    const f = await failureOf(handler.run(item(), context().ctx));
    expect(f.message.startsWith('exit code 1: nnn')).toBe(true);
    expect(f.message.endsWith('THE END')).toBe(true);
    expect(f.message.length).toBeLessThan(2100);
  });

  it('reports death by signal', async () => {
    const handler = createExecHandler(handlerConfig([NODE, fixture('kill-self.mjs')]), { sourceDir: src });
    const f = await failureOf(handler.run(item(), context().ctx));
    expect(f.message).toBe('killed by SIGKILL: about to die');
  });

  it('logs stdout lines as info and stderr lines as warn', async () => {
    const handler = createExecHandler(handlerConfig([NODE, fixture('log-lines.mjs')]), { sourceDir: src });
    const { ctx, lines } = context();
    await handler.run(item(), ctx);
    const out = lines.filter((l) => l.stream);
    expect(out).toContainEqual(expect.objectContaining({ level: 30, stream: 'stdout', msg: 'hello from stdout' }));
    expect(out).toContainEqual(expect.objectContaining({ level: 40, stream: 'stderr', msg: 'careful: stderr' }));
    expect(out).toContainEqual(expect.objectContaining({ level: 30, stream: 'stdout', msg: 'no newline at end' }));
    expect(out).toHaveLength(3);
  });

  it('a script that reopens its stdout or stderr (echo oops > /dev/stderr, tee /dev/stdout) works, as under cron: they are pipes, not sockets', async () => {
    // Node gives a child Unix sockets, which a path cannot reopen (ENXIO: "No such device or
    // address"): the shell's redirection failed, and the script with it.
    const script = 'echo to-stderr > /dev/stderr && echo to-stdout > /dev/stdout && echo piped | tee /dev/stderr && test -p /dev/stdout && test -p /dev/stderr';
    const handler = createExecHandler(handlerConfig(['sh', '-c', script]), { sourceDir: src });
    const { ctx, lines } = context();
    await handler.run(item(), ctx);
    const out = lines.filter((l) => l.stream).map((l) => `${l.stream}: ${l.msg}`);
    expect(out.sort()).toEqual(['stderr: piped', 'stderr: to-stderr', 'stdout: piped', 'stdout: to-stdout']);
  });

  it('caps logged output at maxLogBytes, says how much it dropped, and never blocks the child', async () => {
    const max = 10_000;
    const handler = createExecHandler(handlerConfig([NODE, fixture('flood.mjs')], { maxLogBytes: max }), { sourceDir: src });
    const { ctx, lines } = context();
    await handler.run(item(), ctx);
    const logged = lines.filter((l) => l.stream === 'stdout');
    expect(logged.reduce((n, l) => n + Buffer.byteLength(l.msg), 0)).toBeLessThanOrEqual(max);
    expect(logged.length).toBeGreaterThan(5);
    const dropped = lines.filter((l) => l.droppedBytes !== undefined);
    expect(dropped).toHaveLength(1);
    expect(dropped[0]!.droppedBytes).toBe(1024 * 1024 - max);
    expect(dropped[0]!.msg).toMatch(/dropped 1038576 bytes/);
  });

  it('a failure past maxLogBytes still ends its message with the last of stderr', async () => {
    const script = "process.stderr.write('e'.repeat(200000) + '\\nthe last words\\n', () => process.exit(4))";
    const handler = createExecHandler(handlerConfig([NODE, '-e', script], { maxLogBytes: 1000 }), { sourceDir: src });
    const { ctx, lines } = context();
    const f = await failureOf(handler.run(item(), ctx));
    expect(f.message).toMatch(/^exit code 4: e+\nthe last words$/);
    expect(lines.find((l) => l.droppedBytes !== undefined)?.droppedBytes).toBe(200000 + '\nthe last words\n'.length - 1000);
  });

  it('a secret with multi-byte characters cut by maxLogBytes inside one of them: its piece is *** too', async () => {
    // 'pré' fills the budget up to the middle of 'é' (2 bytes): the line ended in U+FFFD and
    // the secret's first characters ('xxpré-') were shown as they were.
    const secret = 'Sécrétpwd';
    const budget = Buffer.byteLength('log: ') + Buffer.byteLength('Sécr') + 1;
    const script = `process.stdout.write('log: ' + ${JSON.stringify(secret)} + '\\n')`;
    const handler = createExecHandler(handlerConfig([NODE, '-e', script], { maxLogBytes: budget }), { sourceDir: src, redact: redactor([secret]) });
    const { ctx, lines } = context();
    await handler.run(item(), ctx);
    const logged = lines.filter((l) => l.stream === 'stdout').map((l) => l.msg);
    expect(logged).toEqual(['log: ***']);
  });

  it('names a missing command', async () => {
    const handler = createExecHandler(handlerConfig(['cronsafe-no-such-command-xyz', '{path}']), { sourceDir: src });
    const f = await failureOf(handler.run(item(), context().ctx));
    expect(f.message).toMatch(/"cronsafe-no-such-command-xyz": ENOENT \(command not found\)/);
    expect(f).toBeInstanceOf(EnvironmentFault); // the environment's fault: the pass must not charge it
  });

  // The kernel's ENOENT for a script whose #! interpreter was removed since the start's check
  // read "command not found", of a program that is there: the message names what is missing.
  it('names the missing #! interpreter of a program that is there', async () => {
    const script = path.join(src, 'uses-gone-interpreter.sh');
    const interpreter = path.join(src, 'no-such-shell');
    writeFileSync(script, `#!${interpreter}\nexit 0\n`, { mode: 0o755 });
    const handler = createExecHandler(handlerConfig([script, '{path}']), { sourceDir: src, whyNotRun: whyProgramNotRun });
    const f = await failureOf(handler.run(item(), context().ctx));
    expect(f.message).toContain(`ENOENT (${JSON.stringify(script)} has a #! interpreter ${JSON.stringify(interpreter)} that does not exist)`);
    expect(f).toBeInstanceOf(EnvironmentFault);
  });

  it('a program named by the item ({path}) that cannot start is the item\'s failure, not the environment\'s', async () => {
    const handler = createExecHandler(handlerConfig(['{path}']), { sourceDir: src });
    const f = await failureOf(handler.run({ id: 'gone', path: path.join(src, 'gone'), attempt: 1 }, context().ctx));
    expect(f.message).toMatch(/ENOENT/);
    expect(f).not.toBeInstanceOf(EnvironmentFault);
  });

  it('gives a name that is not UTF-8 a link that opens the real file, and removes it after the attempt', async () => {
    const raw = Buffer.concat([Buffer.from(`${src}/caf`), Buffer.of(0xe9), Buffer.from('.txt')]);
    writeFileSync(raw, 'real bytes');
    const out = path.join(dir, 'seen.json');
    const script = `const fs = require('fs'); fs.writeFileSync(${JSON.stringify(out)}, JSON.stringify({ p: process.argv[1], c: fs.readFileSync(process.argv[1], 'utf8') }));`;
    const handler = createExecHandler(handlerConfig([NODE, '-e', script, '{path}']), { sourceDir: src });
    // No output directory: the link goes under TMPDIR.
    await handler.run({ id: 'caf\\xe9.txt', path: path.join(src, 'caf\\xe9.txt'), attempt: 1 }, context().ctx);
    const seen = JSON.parse(readFileSync(out, 'utf8')) as { p: string; c: string };
    expect(seen.c).toBe('real bytes');
    expect(path.basename(seen.p)).toBe('caf\\xe9.txt');
    expect(seen.p.startsWith(tmpdir())).toBe(true);
    expect(existsSync(path.dirname(seen.p))).toBe(false);
  });

  it('names a command that is not executable', async () => {
    const script = path.join(dir, 'not-exec.sh');
    writeFileSync(script, '#!/bin/sh\nexit 0\n');
    chmodSync(script, 0o644);
    const handler = createExecHandler(handlerConfig([script]), { sourceDir: src });
    const f = await failureOf(handler.run(item(), context().ctx));
    expect(f.message).toContain(`${JSON.stringify(script)}: EACCES`);
    expect(f).toBeInstanceOf(EnvironmentFault);
  });
});

describe('exec handler: timeout and abort kill the whole process group', () => {
  const item = () => ({ id: 'a.scc', path: path.join(src, 'a.scc'), attempt: 1 });

  async function pidsFrom(file: string): Promise<[number, number]> {
    await waitFor(() => existsSync(file), 'the fixture to report its pids');
    const [child, grandchild] = readFileSync(file, 'utf8').split(' ').map(Number) as [number, number];
    spawned.push(child, grandchild);
    return [child, grandchild];
  }

  it('times out, killing the child and its grandchild', async () => {
    const pids = path.join(dir, 'pids');
    const handler = createExecHandler(handlerConfig([NODE, fixture('spawn-grandchild.mjs'), pids], { timeoutSeconds: 2 }), { sourceDir: src });
    const run = handler.run(item(), context().ctx);
    const [child, grandchild] = await pidsFrom(pids);
    expect(processGone(grandchild)).toBe(false);
    const f = await failureOf(run);
    expect(f.message).toBe('timed out after 2s');
    expect(f.interrupted).toBe(false);
    expect(processGone(child)).toBe(true);
    expect(processGone(grandchild)).toBe(true);
  });

  it('on abort: interrupted=true and the group is gone when the promise settles', async () => {
    const pids = path.join(dir, 'pids');
    // killAfterSeconds far away: SIGTERM must reach the grandchild too, not only the SIGKILL.
    const handler = createExecHandler(handlerConfig([NODE, fixture('spawn-grandchild.mjs'), pids], { killAfterSeconds: 30 }), {
      sourceDir: src,
    });
    const ac = new AbortController();
    const run = handler.run(item(), context({ signal: ac.signal }).ctx);
    const [child, grandchild] = await pidsFrom(pids);
    const t0 = Date.now();
    ac.abort(new Error('drain deadline'));
    const f = await failureOf(run);
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(f.message).toBe('interrupted: drain deadline');
    expect(f.interrupted).toBe(true);
    expect(processGone(child)).toBe(true);
    expect(processGone(grandchild)).toBe(true);
  });

  it('when the helper that forks the children dies under the attempt: the attempt fails (charged, as a crash would), its group is ended, the next attempt runs', async () => {
    const pids = path.join(dir, 'pids');
    const handler = createExecHandler(handlerConfig([NODE, fixture('spawn-grandchild.mjs'), pids]), { sourceDir: src });
    const { ctx, lines } = context();
    const run = handler.run(item(), ctx);
    const [child, grandchild] = await pidsFrom(pids);
    // The child's parent is the helper (src/runner/handlers/spawn-server.ts), not this process.
    const stat = readFileSync(`/proc/${child}/stat`, 'utf8');
    const helper = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    expect(helper).not.toBe(process.pid);
    process.kill(helper, 'SIGKILL');
    const f = await failureOf(run);
    // Not the environment's (which stops the pass uncharged): a handler that kills its parent would stop every run.
    expect(f).not.toBeInstanceOf(EnvironmentFault);
    expect(f.interrupted).toBeFalsy();
    expect(f.message).toMatch(/exited \(SIGKILL\) during the attempt/);
    // The child had not exited: its parent died, and the log says that, not "handler exited".
    expect(lines.map((l) => l.msg).filter((m) => /handler exited|parent process/.test(String(m)))).toEqual([
      "the handler's parent process (cronsafe's helper that forks handlers) died; terminating the handler's process group",
    ]);
    expect(processGone(child)).toBe(true);
    expect(processGone(grandchild)).toBe(true);
    await expect(createExecHandler(handlerConfig([NODE, '-e', '0']), { sourceDir: src }).run(item(), context().ctx)).resolves.toBeUndefined();
  });

  it('a handler that kills the helper first thing, before its pid reached cronsafe: its group is still ended', async () => {
    // `kill -9 $PPID` as the first command: the helper often dies before it has sent the pid.
    // Such a child was not ended: it ran on beside the item's retry and past the run's end.
    const marker = `kills-parent-${randomBytes(6).toString('hex')}`;
    const handler = createExecHandler(handlerConfig(['sh', '-c', 'kill -9 $PPID; sleep 30', marker], { killAfterSeconds: 1 }), { sourceDir: src });
    const survivors = (): number[] => {
      const alive: number[] = [];
      for (const name of readdirSync('/proc')) {
        if (!/^\d+$/.test(name)) continue;
        try {
          if (readFileSync(`/proc/${name}/cmdline`, 'latin1').includes(marker) && !processGone(Number(name))) alive.push(Number(name));
        } catch {
          /* exited while we looked */
        }
      }
      return alive;
    };
    try {
      // Several attempts: whether the pid got out before the helper died is a race, lost about half the time.
      for (let attempt = 1; attempt <= 8; attempt++) {
        const f = await failureOf(handler.run(item(), context({ attempt }).ctx));
        expect(f).not.toBeInstanceOf(EnvironmentFault);
        expect(f.message).toMatch(/exited \(SIGKILL\) during the attempt/);
        expect(survivors(), `attempt ${attempt}`).toEqual([]);
      }
    } finally {
      // A failing run must not leave them behind: each leads its group (sh and its sleep).
      for (const pid of survivors()) {
        try { process.kill(-pid, 'SIGKILL'); } catch { /* already gone */ }
      }
    }
  });

  it('a handler that exited 0 while what it left in its group is ended: the helper dying then does not fail the attempt', async () => {
    // It wrote its output and exited 0; a process it backgrounded (ignoring SIGTERM) holds the
    // pipes until SIGKILL. The helper killed meanwhile (the OOM killer, an operator) charged a
    // failure 'did the handler kill its parent process?' to an attempt that had succeeded.
    const [ppid, left] = [path.join(dir, 'ppid'), path.join(dir, 'left')];
    const script = `echo $PPID > "$PPIDF"; (trap '' TERM; exec sh -c 'echo $$ > "$LEFT"; exec sleep 30') & exit 0`;
    const handler = createExecHandler(handlerConfig(['sh', '-c', script], { killAfterSeconds: 2, env: { PPIDF: ppid, LEFT: left } }), { sourceDir: src });
    const { ctx, lines } = context();
    const run = handler.run(item(), ctx);
    // Whole pids: each file exists, empty, before its echo writes it.
    const whole = (f: string) => existsSync(f) && /^\d+\n$/.test(readFileSync(f, 'utf8'));
    await waitFor(() => whole(left) && whole(ppid) && lines.some((l) => /handler exited but left processes in its group/.test(l.msg)), 'the leftover to be found');
    const leftover = Number(readFileSync(left, 'utf8'));
    spawned.push(leftover);
    const helper = Number(readFileSync(ppid, 'utf8'));
    expect(helper).not.toBe(process.pid);
    process.kill(helper, 'SIGKILL');
    await expect(run).resolves.toBeUndefined();
    expect(processGone(helper)).toBe(true);
    expect(processGone(leftover)).toBe(true);
  });

  it('a handler that kills the helper first thing: a process started before it with the same variables is not taken for it', async () => {
    // Looked for by its variables, the child was taken to be the first started of the session
    // leaders that had them: an operator's shell with them exported to debug the item (or an
    // earlier run's leftover) was killed instead, and the child ran on.
    const marker = `kills-parent-${randomBytes(6).toString('hex')}`;
    const { ctx } = context({ attempt: 1 });
    const decoy = spawn('sh', ['-c', 'sleep 300; :', `decoy-${marker}`], {
      detached: true,
      stdio: 'ignore',
      env: { ...process.env, CRONSAFE_ITEM_PATH: item().path, CRONSAFE_ITEM_ID: item().id, CRONSAFE_ATTEMPT: '1', CRONSAFE_OUTPUT_PATH: ctx.outputPath! },
    });
    const decoyPid = decoy.pid!;
    spawned.push(decoyPid);
    await waitFor(() => readFileSync(`/proc/${decoyPid}/environ`, 'latin1').includes('CRONSAFE_ITEM_ID='), 'the decoy to exec');
    // Started a while before (an operator's shell is minutes older): by the kernel's clock, in
    // ticks since boot (/proc/<pid>/stat's 22nd field, /proc/uptime), half a second ago.
    const stat = readFileSync(`/proc/${decoyPid}/stat`, 'utf8');
    const decoyStarted = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
    await waitFor(() => Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * 100 >= decoyStarted + 50, 'the decoy to be half a second old');
    const handler = createExecHandler(handlerConfig(['sh', '-c', 'kill -9 $PPID; sleep 30', marker], { killAfterSeconds: 1 }), { sourceDir: src });
    const survivors = (): number[] => {
      const alive: number[] = [];
      for (const name of readdirSync('/proc')) {
        if (!/^\d+$/.test(name)) continue;
        try {
          const cmdline = readFileSync(`/proc/${name}/cmdline`, 'latin1');
          if (cmdline.includes(marker) && !cmdline.includes('decoy-') && !processGone(Number(name))) alive.push(Number(name));
        } catch {
          /* exited while we looked */
        }
      }
      return alive;
    };
    try {
      // Whether the pid got out before the helper died is a race, lost about half the time.
      for (let i = 1; i <= 8; i++) {
        const f = await failureOf(handler.run(item(), context({ attempt: 1, outputPath: ctx.outputPath }).ctx));
        expect(f.message).toMatch(/exited \(SIGKILL\) during the attempt/);
        expect(processGone(decoyPid), `run ${i}: the decoy`).toBe(false);
        expect(survivors(), `run ${i}`).toEqual([]);
      }
    } finally {
      try { process.kill(-decoyPid, 'SIGKILL'); } catch { /* already gone */ }
      for (const pid of survivors()) {
        try { process.kill(-pid, 'SIGKILL'); } catch { /* already gone */ }
      }
    }
  });

  it('an abort before the child\'s pid is known still ends its group, at once', async () => {
    const pids = path.join(dir, 'pids');
    const handler = createExecHandler(handlerConfig([NODE, fixture('spawn-grandchild.mjs'), pids], { killAfterSeconds: 30 }), { sourceDir: src });
    const ac = new AbortController();
    const run = handler.run(item(), context({ signal: ac.signal }).ctx);
    // The spawn request is on its way to the helper; its pid has not come back yet.
    const t0 = Date.now();
    ac.abort(new Error('drain deadline'));
    const f = await failureOf(run);
    expect(f.interrupted).toBe(true);
    // Not at the timeout (20 s) nor after killAfterSeconds (30 s): SIGTERM went to the group.
    expect(Date.now() - t0).toBeLessThan(5000);
    if (existsSync(pids)) {
      const [child, grandchild] = readFileSync(pids, 'utf8').split(' ').map(Number) as [number, number];
      expect(processGone(child)).toBe(true);
      expect(processGone(grandchild)).toBe(true);
    }
  });

  it('does not spawn when already aborted', async () => {
    const record = path.join(dir, 'record.json');
    const handler = createExecHandler(handlerConfig([NODE, fixture('record-args.mjs')], { env: { RECORD_FILE: record } }), { sourceDir: src });
    const ac = new AbortController();
    ac.abort(new Error('second signal'));
    const f = await failureOf(handler.run(item(), context({ signal: ac.signal }).ctx));
    expect(f).toMatchObject({ message: 'interrupted: second signal', interrupted: true });
    expect(existsSync(record)).toBe(false);
  });

  it('SIGKILLs a child that ignores SIGTERM after killAfterSeconds', async () => {
    const ready = path.join(dir, 'ready');
    const handler = createExecHandler(handlerConfig([NODE, fixture('ignore-sigterm.mjs'), ready], { killAfterSeconds: 0.5 }), { sourceDir: src });
    const ac = new AbortController();
    const run = handler.run(item(), context({ signal: ac.signal }).ctx);
    // Its pid whole: the file exists, empty, before the write.
    await waitFor(() => existsSync(ready) && /^\d+$/.test(readFileSync(ready, 'utf8').trim()), 'the SIGTERM handler to be installed');
    const pid = Number(readFileSync(ready, 'utf8'));
    spawned.push(pid);
    const t0 = Date.now();
    ac.abort(new Error('drain deadline'));
    const f = await failureOf(run);
    const waited = Date.now() - t0;
    expect(f.interrupted).toBe(true);
    expect(waited).toBeGreaterThanOrEqual(450); // it survived SIGTERM...
    expect(waited).toBeLessThan(5000); // ...until the SIGKILL
    expect(processGone(pid)).toBe(true);
  });

  it('does not settle while a grandchild that ignores SIGTERM lives on without our pipes', async () => {
    const pids = path.join(dir, 'pids');
    const handler = createExecHandler(handlerConfig([NODE, fixture('stubborn-grandchild.mjs'), pids], { killAfterSeconds: 0.5 }), {
      sourceDir: src,
    });
    const ac = new AbortController();
    const run = handler.run(item(), context({ signal: ac.signal }).ctx);
    const [child, grandchild] = await pidsFrom(pids);
    const t0 = Date.now();
    ac.abort(new Error('drain deadline'));
    const f = await failureOf(run);
    expect(f.interrupted).toBe(true);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(450);
    expect(processGone(child)).toBe(true);
    expect(processGone(grandchild)).toBe(true);
  });

  it('succeeds when the child exits 0, and ends what it left behind holding our pipes', async () => {
    const pids = path.join(dir, 'pids');
    const handler = createExecHandler(handlerConfig([NODE, fixture('orphan-holding-pipes.mjs'), pids], { timeoutSeconds: 30 }), {
      sourceDir: src,
    });
    const { ctx, lines } = context();
    const t0 = Date.now();
    await handler.run(item(), ctx);
    expect(Date.now() - t0).toBeLessThan(10_000); // not the 30 s timeout
    const [, grandchild] = await pidsFrom(pids);
    expect(processGone(grandchild)).toBe(true);
    expect(lines.some((l) => l.level === 40 && /left processes in its group/.test(l.msg))).toBe(true);
  });

  it('warns when the child exits 0 and leaves a process in its group without our pipes (a writer cut short)', async () => {
    // A script that backgrounds its writer and forgets to `wait`: the writer holds none of
    // our pipes, so the pipes close with the script and the group is ended at once.
    const script = path.join(dir, 'no-wait.sh');
    writeFileSync(script, '#!/bin/sh\n( sleep 0.3; echo late ) > /dev/null 2>&1 < /dev/null &\nexit 0\n', { mode: 0o755 });
    const handler = createExecHandler(handlerConfig([script], { timeoutSeconds: 30 }), { sourceDir: src });
    const { ctx, lines } = context();
    await handler.run(item(), ctx);
    expect(lines.some((l) => l.level === 40 && /left processes in its group/.test(l.msg))).toBe(true);
  });

  it('settles even when a process that escaped the group holds our pipes', async () => {
    const pids = path.join(dir, 'pids');
    const handler = createExecHandler(handlerConfig([NODE, fixture('escaped-holding-pipes.mjs'), pids], { timeoutSeconds: 30, killAfterSeconds: 0.2 }), {
      sourceDir: src,
    });
    const { ctx, lines } = context();
    const run = handler.run(item(), ctx);
    await pidsFrom(pids); // registers the escaped grandchild for afterEach to kill
    await run;
    expect(lines.some((l) => l.level === 40 && /outside its group still holds/.test(l.msg))).toBe(true);
  });
});
