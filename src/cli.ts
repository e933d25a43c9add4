#!/usr/bin/env -S node --v8-pool-size=1 --heap-growing-percent=10 --max-semi-space-size=2
// The bin's entry: signals first, then everything else. It has no static import on
// purpose: ESM evaluates every static import before the importing module's body, so the
// handlers below would otherwise wait for commander, the config schema, pino and the
// rest to load, and a SIGTERM in that window would kill the process with 143 instead of
// draining. It is also the only place that installs signal handlers or calls process.exit.

/**
 * The conventional exit code of a process ended by a signal is 128 + its number. SIGALRM is
 * a stop like SIGTERM (`timeout -s ALRM`, a supervisor's alarm): by default it ended a run or
 * a daemon at once, exit 142, with no drain, no `daemon stopped` line and no word of why.
 */
const SIGNAL_NUMBER = { SIGHUP: 1, SIGINT: 2, SIGTERM: 15, SIGALRM: 14 } as const;
type HandledSignal = keyof typeof SIGNAL_NUMBER;

/** Commands that drain on a signal. The others have nothing to hand back and just end. */
const DRAINING = new Set(['run', 'daemon']);

const stop = new AbortController();
const force = new AbortController();
let first: HandledSignal | undefined;
// 'pending' until the command is known: a signal is only recorded, because a `run` must
// still see it (as an already-aborted stop) and drain, while any other command ends.
let mode = 'pending' as 'pending' | 'drain' | 'end'; // set by callbacks: not narrowed here

// Taken before any module handler loads: while one is loaded, process.exit throws
// (src/runner/handlers/exit-guard.ts), so that handler code cannot end the run.
const processExit = process.exit.bind(process);
/** Set once loaded (src/hung-up-tty.ts): a terminal that hung up must not crash Node's exit. */
let beforeExit: (() => void) | undefined;
const exit = (code: number): never => {
  beforeExit?.();
  try {
    return processExit(code);
  } catch (err) {
    // An 'exit' listener that a module handler's code added threw as the process exited (a
    // clean-up's rmSync of a directory already gone): printed as `cronsafe: fatal:` with its
    // raw stack, a password in its message in clear. Said in one line, its secrets hidden
    // (exit-guard.ts), exit 1 as a late break; Node emits 'exit' once, so this exit ends it.
    const said = (globalThis as Record<symbol, ((e: unknown) => string) | undefined>)[Symbol.for('cronsafe.exitListenerThrew')];
    if (said === undefined) throw err;
    process.stderr.write(`cronsafe: handler code broke the process as it exited: ${said(err)}\n`);
    return processExit(1);
  }
};

// Handler code breaking the process once its module handler is let go (a timer an attempt
// left, firing after the run ended): said in one line, its secrets hidden
// (src/runner/handlers/exit-guard.ts hears it, LATE_BREAK), not Node's raw report.
(globalThis as Record<symbol, unknown>)[Symbol.for('cronsafe.lateBreak')] = (why: string): void => {
  process.stderr.write(`cronsafe: handler code broke the process after its handler was let go (from a timer or callback an attempt left): ${why}\n`);
  exit(1);
};

/** What a command ended by a signal has done that stays done (requeue's pages moved), said on stderr. */
let endNote: ((sig: string) => string | undefined) | undefined;
const endBySignal = (sig: HandledSignal): never => {
  const note = endNote?.(sig);
  if (note !== undefined) process.stderr.write(`cronsafe: ${note}\n`);
  return exit(128 + SIGNAL_NUMBER[sig]);
};

/**
 * The drain's last resort. The runner keeps the drain's deadline itself, but the writes it
 * makes on the way out (results, hand-backs, the run's end) can hang on the ledger: on
 * PostgreSQL a statement waits as long as a lock on its table is held (an operator's
 * `LOCK TABLE`, `VACUUM FULL`, a non-concurrent index build) or a dead connection keeps it.
 * The kubelet's SIGKILL would then end the pod with 137 at gracePeriodSeconds. Instead the
 * process exits 75 before that: a sixth of the margin before it (at least a quarter of a
 * second, or a third of the margin if less), or one margin (at least a second) after a second
 * signal ("a second signal aborts at once"). What it had not written is what a SIGKILL
 * would leave, claims that the next run takes back after their lease. The
 * rest of the margin is the runner's: the handlers' kill (a third of it), the last push, then
 * the Lease's release and Events (a quarter each) end within five sixths of it. The exit came
 * a quarter of a second before the SIGKILL: the signal handler's own start, the timer and the
 * exit all come late on a loaded node (a pod at its CPU limit, throttled), and on a 2-core
 * machine running six runs they came 0.4 s late, after the kubelet's SIGKILL would have.
 */
let stoppedAt: number | undefined;
let drain: { graceMs: number; marginMs: number } | undefined;
let lastResort: NodeJS.Timeout | undefined;
/** The exit code of a draining command that has returned, while its log is still being written. */
let finishedWith: number | undefined;
// After a second signal the runner still kills the handlers' groups (at least 0.2 s, see
// Drain.killAfterMs) and hands their claims back: a small margin (0 is valid) must not
// cut that short, or the claims are left to the next run, which charges them.
const AFTER_SECOND_SIGNAL_MIN_MS = 1000;
function armLastResort(): void {
  if (mode !== 'drain' || drain === undefined || stoppedAt === undefined) return;
  const byStop = stoppedAt + drain.graceMs - Math.max(Math.min(250, drain.marginMs / 3), drain.marginMs / 6);
  const afterSecond = Date.now() + Math.max(drain.marginMs, AFTER_SECOND_SIGNAL_MIN_MS);
  const at = force.signal.aborted ? Math.min(byStop, afterSecond) : byStop;
  clearTimeout(lastResort);
  lastResort = setTimeout(() => {
    if (finishedWith !== undefined) {
      // The run had ended (its results written) and only waited for stdout's reader.
      process.stderr.write(`cronsafe: the reader of stdout did not take the log's last lines within drain.gracePeriodSeconds: exiting without them\n`);
      exit(finishedWith);
    }
    process.stderr.write(`cronsafe: the drain did not end within drain.gracePeriodSeconds (a ledger write is blocked, the start still waits for the ledger or its run lock, or the log waits for a reader of stdout that stopped reading): exiting before the kubelet's SIGKILL; what was not written is taken back after its lease\n`);
    exit(75);
  }, Math.max(0, at - Date.now()));
  lastResort.unref();
}

/**
 * First SIGTERM / SIGINT / SIGHUP / SIGALRM drains, a second aborts at once. With handlers
 * installed, Node as PID 1 (no init) still reacts to SIGTERM: the kernel's "PID 1 ignores
 * default-action signals" rule only applies to signals without a handler.
 */
function onSignal(sig: HandledSignal): void {
  if (mode === 'end') endBySignal(sig);
  if (!stop.signal.aborted) {
    first = sig;
    stoppedAt = Date.now();
    stop.abort(sig);
  } else if (!force.signal.aborted) {
    force.abort(`second ${sig}`);
  }
  armLastResort();
}
for (const sig of Object.keys(SIGNAL_NUMBER) as HandledSignal[]) process.on(sig, onSignal);

// SIGQUIT and SIGUSR2 end the process at once, as a crash does (docs/operations.md: the
// attempts running are charged): a deliberate kill, kept. It was silent (exit 131 / 140, a
// daemon gone with no `daemon stopped` line): one stderr line now says what it was and that
// SIGTERM drains, then the signal is raised again with its default action, so the process
// still dies of it. Not SIGUSR2 under `node --report-on-signal`: Node's diagnostic report
// takes that signal, and the process goes on.
const CRASH_SIGNALS = ['SIGQUIT', 'SIGUSR2'] as const;
const onCrashSignal = (sig: (typeof CRASH_SIGNALS)[number]): void => {
  // During a drain the stop is recorded in the ledger: the next run hands back uncharged what
  // the drain had not (docs/operations.md, "Crashes"), so "charged" would be untrue then.
  const running =
    mode !== 'drain'
      ? ''
      : stop.signal.aborted
        ? ` (the drain is cut short, as by a kill: the next run hands back uncharged the attempts it had not)`
        : ' (no drain: the attempts running are charged, as after a crash; SIGTERM drains)';
  process.stderr.write(`cronsafe: ${sig}: ending at once${running}\n`);
  process.removeAllListeners(sig); // its default action back
  process.kill(process.pid, sig);
};
for (const sig of CRASH_SIGNALS) {
  if (!(process.report?.reportOnSignal === true && process.report.signal === sig)) process.on(sig, onCrashSignal);
}

// SIGUSR1 is Node's signal to start its inspector: with no listener of ours, a SIGUSR1 (a
// log-rotation script's `kill -USR1`, a sidecar's) made cronsafe listen on 127.0.0.1:9229 for
// a debugger, with no authentication, for the rest of the run: any process that reaches the
// loopback (another user on the host, every container of the pod) could then run code as
// cronsafe, with the ledger's password in reach. A listener keeps the inspector off; the
// signal is only said. `node --inspect` still debugs cronsafe on purpose.
let usr1Said = false;
process.on('SIGUSR1', () => {
  if (usr1Said) return;
  usr1Said = true;
  process.stderr.write(`cronsafe: SIGUSR1 ignored (it would open Node's debugger to anyone on the loopback; use node --inspect to debug)\n`);
});

// A report's stdout whose reader left (`| true`, >/dev/full): the error is emitted on a
// later tick, before settleStdout listens, and unheard it ends the process with a stack
// trace. Noted from the start, so the command ends with the one "output incomplete" line.
// Not for run and daemon, which log to fd 1 through their own stream.
let stdoutFailed: Error | undefined;
/** process.stdout, once made in a run (a module handler's console.log). */
let handlerStdout: NodeJS.WriteStream | undefined;
/** process.stderr, once made (a line said, a module handler's console.error). */
let madeStderr: NodeJS.WriteStream | undefined;

/**
 * Calls `made` with process[name] when something first makes it (Node makes a stdio stream
 * on first use), and returns true; false if Node's getter cannot be wrapped.
 */
function whenMade(name: 'stdout' | 'stderr', made: (stream: NodeJS.WriteStream) => void): boolean {
  const desc = Object.getOwnPropertyDescriptor(process, name);
  const get = desc?.get?.bind(process);
  if (!get || !desc?.configurable) return false;
  let stream: NodeJS.WriteStream | undefined;
  Object.defineProperty(process, name, {
    configurable: true,
    enumerable: desc.enumerable,
    get(): NodeJS.WriteStream {
      if (stream === undefined) {
        stream = get() as NodeJS.WriteStream;
        made(stream);
      }
      return stream;
    },
  });
  return true;
}

if (!DRAINING.has(process.argv.slice(2).find((a) => !a.startsWith('-')) ?? '')) {
  process.stdout.on('error', (err) => {
    stdoutFailed ??= err;
  });
} else {
  // A module handler's own console.log after the log's reader left (`cronsafe run | head`):
  // Node reports the EPIPE on process.stdout on a later tick, and unheard it was an uncaught
  // exception that failed the run (exit 1) and stopped its pass. Heard once the handler makes
  // the stream (made here, on a pipe it would change fd 1's flags for nothing); the log
  // itself says on stderr that stdout failed.
  whenMade('stdout', (stdout) => {
    stdout.on('error', () => undefined);
    boundQueue(stdout, 'stdout', 'console.log');
    handlerStdout = stdout;
  });
}

/**
 * A module handler's console.log and console.error with the known secrets as `***`, as a
 * command handler's output is: the function exit-guard.ts sets on globalThis while a module
 * handler is loaded (the program may run as a script of its own, code-cache.ts, which shares
 * no module with this one).
 */
const redactPrinted = (text: string): string => {
  const redact = (globalThis as Record<symbol, ((t: string) => string) | undefined>)[Symbol.for('cronsafe.redactPrinted')];
  return redact ? redact(text) : text;
};

/**
 * Into a pipe that is not read, Node queues what a module handler prints (console.log on
 * stdout, console.error on stderr) in memory without a bound: a handler that logs each item
 * would grow the run until it is OOM-killed, its attempts charged. As for the run's own log
 * (src/log-sink.ts), what is printed past 8 MiB waiting is dropped and counted, and once the
 * reader has taken the rest, one line on stderr says how many writes were lost.
 */
function boundQueue(stream: NodeJS.WriteStream, name: string, how: string): void {
  const LIMIT_BYTES = 8 * 1024 * 1024;
  const write = stream.write.bind(stream) as (chunk: unknown, ...rest: unknown[]) => boolean;
  let dropped = 0;
  stream.write = ((chunk: unknown, ...rest: unknown[]): boolean => {
    if (stream.writableLength <= LIMIT_BYTES) return write(typeof chunk === 'string' ? redactPrinted(chunk) : chunk, ...rest);
    dropped++;
    const cb = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
    if (cb) process.nextTick(cb);
    return false;
  });
  stream.on('drain', () => {
    if (dropped === 0) return;
    process.stderr.write(`cronsafe: ${name} was not read for a while: ${dropped} write(s) a module handler made to it (${how}) were dropped\n`);
    dropped = 0;
  });
}

// A stderr that cannot take a line (2>/dev/full, a closed pipe): the line is lost, but the
// exit code must still be the one the line explained (78 for a bad config, 2 for a usage
// error), not 1 from the write's unheard error event. There is nowhere left to report it.
// Listened on once made (whenMade), not made here: making it loads node:net (a pipe),
// node:tty (a terminal) or the stream stack (a file), ~7 ms of CPU in every start that says
// nothing on stderr, as a lock-skipped run (docs/benchmarks.md, start-up). A preload (`node
// -r`, `--import`, NODE_OPTIONS) may have made it already, unheard: then listened on now.
const stderrMade = (stderr: NodeJS.WriteStream): void => {
  stderr.on('error', () => undefined);
  if (DRAINING.has(process.argv.slice(2).find((a) => !a.startsWith('-')) ?? '')) boundQueue(stderr, 'stderr', 'console.error');
  madeStderr = stderr;
};
const PRELOAD = /(?:^|\s)(?:-r|--require|--import|--loader|--experimental-loader)(?:[=\s]|$)/;
if (PRELOAD.test(`${process.execArgv.join(' ')} ${process.env.NODE_OPTIONS ?? ''}`) || !whenMade('stderr', stderrMade)) stderrMade(process.stderr);

/** Called by a draining command once its config is known: drain.gracePeriodSeconds and marginSeconds, in ms. */
function drainBudget(graceMs: number, marginMs: number): void {
  drain = { graceMs, marginMs };
  armLastResort();
}

/**
 * Called by run when it drains because its run lock or Lease was lost, with no signal: the
 * drain's last resort counts from now, as for a SIGTERM now (the kubelet's SIGKILL is not
 * coming, but a ledger write hanging on a database gone silent must not keep the run alive).
 */
function safetyLost(): void {
  stoppedAt ??= Date.now();
  armLastResort();
}

/** Called by the program once it knows which (sub)command runs, before that command starts. */
function commandStarts(name: string): void {
  if (DRAINING.has(name)) {
    mode = 'drain';
    return;
  }
  mode = 'end';
  if (first) endBySignal(first);
}

// No top-level await: the bin is also built as CommonJS (dist/cli.cjs, scripts/bundle.mjs),
// which Node starts without its ES module loader (~10 ms of every start-up).
void (async () => {
  try {
    // Memory stays flat on long runs. The bin's flags (its shebang, the image's ENTRYPOINT):
    // - --heap-growing-percent=10: after a major collection V8 lets the old generation grow by
    //   10% of what survived, or its fixed 8 MB step if more, instead of its default factor (up
    //   to 4x); src/heap-growth.ts starts the marking at 30% of that step;
    // - --max-semi-space-size=2: the young generation grows from V8's 1 MiB to 2 MiB once a run
    //   keeps objects past a scavenge (~half the scavenges; a start-up stays at 1 MiB);
    // - --v8-pool-size=1: one V8 worker thread instead of four. Each thread that compiles or
    //   collects garbage in the background gets its own malloc arena, and their growth was 5-11
    //   MiB of a 1,000,000-item run's peak RSS, nearly all of it TurboFan's background compiles.
    // They replace --optimize-for-size, whose memory-reducing major collections cost ~15% of a
    // no-op pass's CPU for the same flat memory (docs/benchmarks.md, "2026-12-06 21:13-22:25
    // UTC" and the note at 22:28).
    // Plain `node dist/cli.js` keeps --optimize-for-size, set here: the pool size and the young
    // generation's limit cannot be (Node starts the threads, and V8 sizes the young generation
    // at 16 MiB, when it makes the heap, before any JavaScript runs), and without them the
    // growing percent set here measured no better for plain node (1.17-1.18x at 1,000,000
    // items against 1.15x, one run each); the young generation is kept from growing instead
    // (growth factor 1), which is what the flag's smaller one amounts to. `NODE_OPTIONS=--v8-pool-size=1` gives it the
    // bin's thread count (docs/benchmarks.md, "Memory with plain node"). With the bin's flags
    // on node's command line (src/code-cache.ts knows the way of starting by the same flag)
    // node:v8 (~5 ms) is not loaded here.
    if (!process.execArgv.includes('--heap-growing-percent=10')) {
      const { setFlagsFromString } = await import('node:v8');
      setFlagsFromString('--optimize-for-size');
      setFlagsFromString('--semi-space-growth-factor=1');
    }
    const { ready, main, closeHungUpTerminals, settleStdout, logsWritten } = await import('./program.js');
    await ready();
    // The program compiles synchronously (src/code-cache.ts): a signal that came meanwhile
    // waits for the event loop to poll, which it does here, before the command starts (a
    // `status` then ends without output, a `run` drains before it claims). Two immediates: run
    // from a poll callback (an `--import` preload's start), the first comes before the next poll.
    for (let turn = 0; turn < 2; turn++) await new Promise((r) => setImmediate(r));
    beforeExit = closeHungUpTerminals;
    const code = await main(process.argv, { stop: stop.signal, force: force.signal, commandStarts, drainBudget, safetyLost, onEnd: (note) => (endNote = note) });
    // --help, --version or a usage error, interrupted while loading: end as the signal asked.
    if (mode === 'pending' && first) endBySignal(first);
    if (mode !== 'drain') {
      // Never exit with output still queued for a slow reader, nor 0 after the reader left.
      const cut = await settleStdout(stdoutFailed);
      if (cut && code === 0) {
        process.stderr.write(`cronsafe: ${cut.message}\n`);
        exit(1);
      }
    } else {
      // The run's log into a pipe or socket waits in memory for its reader (src/log-sink.ts):
      // its last lines, `run finished` among them, are not lost to the exit. A reader that never reads again keeps
      // the process here only until the drain's last resort, when a stop asked for one.
      finishedWith = code;
      await logsWritten();
      // One turn of the event loop before the exit, as the run had while this loaded the log
      // sink: a callback that an attempt's handler code left (a timer, an immediate) runs now,
      // and should it break the process, that is said in one line with its secrets hidden and
      // exit 1 (the late break above), rather than the exit racing it.
      await new Promise((r) => setImmediate(r));
      // A module handler's own console.log into a pipe: Node writes it without waiting and
      // drops what the pipe has not taken yet at the exit (cut mid-line, `cronsafe run | cat`).
      // The same for what waits on stderr (a handler's console.error; the line saying how much was dropped).
      const waiting = (s: NodeJS.WriteStream | undefined): boolean => s !== undefined && !s.destroyed && s.writableLength > 0;
      while (waiting(handlerStdout) || waiting(madeStderr)) await new Promise((r) => setTimeout(r, 10));
    }
    exit(code);
  } catch (err) {
    process.stderr.write(`cronsafe: fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    try {
      await (await import('./log-sink.js')).logsWritten();
    } finally {
      exit(1);
    }
  }
})();
