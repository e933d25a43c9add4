import { existsSync, statSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import path from 'node:path';
import type { HandlerConfig } from '../../config/types.js';
import { noRedact, type Redact } from '../../redact.js';
import { ConfigError, coerceError } from '../../errors.js';
import { EnvironmentFault, NotStarted } from '../faults.js';
import { isPlainId } from '../item-id.js';
import { HandlerFailure, interrupted, KilledBySignal, ProgramNotFound, TimedOut, type Handler, type HandlerContext, type HandlerOptions, type WorkItem } from '../types.js';
import { OutputCapture } from './capture.js';
import { itemLink } from './item-link.js';
import { exitedAlready, findSessionLeader, groupAlive, sessionAlive, signalSession, waitGroupGone } from './process-group.js';
import { spawnChild, type RemoteChild, type SpawnRequest } from './spawn-server.js';
import { killBudgetMs } from '../drain.js';

/** How long past the SIGKILL we wait for the group to vanish before settling anyway. */
const REAP_SLACK_MS = 2000;
/** Said once per process: the children's stdout and stderr are sockets (see spawn-server.ts). */
let warnedSockets = false;
/** After an abort (a drain) the child is gone: how long its pipes may stay open after it. */
const ABORTED_PIPE_SLACK_MS = 250;
/** How long after the child's exit its pipes may stay open before we look for who holds them. */
const LINGER_CHECK_MS = 50;

/** Values substituted for `{path}`, `{id}`, `{output}`, `{attempt}`. */
export interface Placeholders {
  path: string;
  id: string;
  output: string;
  attempt: string;
}

const PLACEHOLDER = /\{(path|id|output|attempt)\}/g;
const PLACEHOLDER_TEST = /\{(path|id|output|attempt)\}/;

/**
 * libpq's own environment variables (PostgreSQL's "Environment Variables"), passed on to a
 * handler for its own database even when one holds the ledger's password (PGPASSWORD). Not
 * every name starting with PG: `state.postgres: ${PGURL}` (docs/configuration.md's example)
 * is cronsafe's URL, password included.
 */
const LIBPQ_ENV =
  /^PG(?:HOST|HOSTADDR|PORT|DATABASE|USER|PASSWORD|PASSFILE|REQUIREAUTH|CHANNELBINDING|SERVICE|SERVICEFILE|OPTIONS|APPNAME|SSL[A-Z]*|REQUIRESSL|REQUIREPEER|GSSENCMODE|KRBSRVNAME|GSSLIB|GSSDELEGATION|CONNECT_TIMEOUT|CLIENTENCODING|TARGETSESSIONATTRS|LOADBALANCEHOSTS|DATESTYLE|TZ|GEQO|SYSCONFDIR|LOCALEDIR)$/;

/**
 * Substitute placeholders in one argv element, in a single pass: text that a value
 * brings in (a file literally named `{id}`) is never expanded again. Unknown `{x}` stay.
 */
export function expandArg(arg: string, values: Placeholders): string {
  return arg.replace(PLACEHOLDER, (_m, key: keyof Placeholders) => values[key]);
}

/**
 * A handler that runs `handler.command` once per attempt: no shell, its own process
 * group (so a timeout or drain kills grandchildren too), stdout/stderr logged line by
 * line under `handler.maxLogBytes`. Settles only after the child closed its pipes and
 * its group is gone, so the runner never commits while something still writes.
 */
export function createExecHandler(cfg: HandlerConfig, opts: HandlerOptions): Handler {
  const template = cfg.command;
  if (!template || template.length === 0 || !template[0]) {
    throw new ConfigError('handler.command must be a non-empty argv array', undefined, 'handler.command');
  }
  const usesOutput = template.some((arg) => arg.includes('{output}'));
  // A program named by the item (`{path}`) that cannot start is the item's problem.
  const programFromItem = PLACEHOLDER_TEST.test(template[0]);
  const ownFiles = commandFiles(template, opts.sourceDir);
  // The children's environment, copied once: process.env is a proxy over the C++ environ,
  // and spreading it per item read every variable through the binding (~11% of a
  // `true` handler's run, measured). An inherited CRONSAFE_OUTPUT_PATH (cronsafe run from
  // a handler) must not pose as an item's output.
  // CRONSAFE_STATE_POSTGRES (config/load.ts) is cronsafe's own connection string, password
  // included: a handler that printed its environment put it in the log (handler.env may pass it on).
  const baseEnv: NodeJS.ProcessEnv = { ...process.env };
  delete baseEnv.CRONSAFE_STATE_POSTGRES;
  // So is the variable the config took it from (`state.postgres: ${PGURL}`), or its password
  // from (`${DB_PASSWORD}`). libpq's own variables are passed on, for the handler's database.
  if (opts.holdsLedgerSecret) {
    for (const [name, value] of Object.entries(baseEnv)) {
      if (value !== undefined && !LIBPQ_ENV.test(name) && opts.holdsLedgerSecret(value)) delete baseEnv[name];
    }
  }
  Object.assign(baseEnv, cfg.env);
  delete baseEnv.CRONSAFE_OUTPUT_PATH;
  const childEnv = sameAsLastEnv(baseEnv);
  const redact = opts.redact ?? noRedact;
  return {
    async run(item: WorkItem, ctx: HandlerContext): Promise<void> {
      if (ctx.signal.aborted) throw interrupted(ctx.signal.reason);
      if (usesOutput && ctx.outputPath === undefined) {
        throw new HandlerFailure('handler.command uses {output} but output.directory is not configured');
      }
      // An escaped id (a name with a backslash or non-UTF-8 bytes) is not its own path.
      const link = isPlainId(item.id) ? undefined : await itemLink(opts.sourceDir, item.id, ctx.outputPath);
      const values: Placeholders = {
        path: link?.path ?? item.path,
        id: item.id,
        output: ctx.outputPath ?? '',
        attempt: String(ctx.attempt),
      };
      const argv = template.map((arg) => expandArg(arg, values));
      const extraEnv: Record<string, string> = {
        CRONSAFE_ITEM_PATH: values.path,
        CRONSAFE_ITEM_ID: values.id,
        CRONSAFE_ATTEMPT: values.attempt,
      };
      if (ctx.outputPath !== undefined) extraEnv.CRONSAFE_OUTPUT_PATH = ctx.outputPath;
      try {
        return await runChild(argv, { cwd: opts.sourceDir, baseEnv: childEnv, extraEnv, maxLogBytes: cfg.maxLogBytes }, cfg, ctx, programFromItem, ownFiles, redact, opts.whyNotRun);
      } finally {
        await link?.remove();
      }
    },
  };
}

/** The children's environment of the last handler made, and its text. */
let lastEnv: { text: string; env: NodeJS.ProcessEnv } | undefined;

/**
 * The environment of the last handler made when `env` is the same, else `env`. A helper is
 * sent each environment object once and keeps it for the spawns that name it (spawn-server.ts),
 * for as long as it lives: a daemon makes a handler per pass, with the same environment every
 * time, and its helpers, which live across passes, kept one more copy per pass for good (a
 * 20 KB pod environment, a pass a minute: ~28 MB a day in each).
 */
function sameAsLastEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const text = JSON.stringify(env);
  if (lastEnv?.text === text) return lastEnv.env;
  lastEnv = { text, env };
  return env;
}

type Stop = { kind: 'timeout' } | { kind: 'abort'; reason: unknown };

function runChild(
  argv: string[],
  request: Omit<SpawnRequest, 'file' | 'args'>,
  cfg: HandlerConfig,
  ctx: HandlerContext,
  programFromItem: boolean,
  ownFiles: readonly string[],
  redact: Redact,
  whyNotRun: HandlerOptions['whyNotRun'],
): Promise<void> {
  const [file, ...args] = argv as [string, ...string[]];
  const { cwd } = request;
  return new Promise<void>((resolve, reject) => {
    const capture = new OutputCapture(ctx.log, cfg.maxLogBytes, redact);
    let pid: number | undefined;
    let settled = false;
    let exited = false;
    let exitStatus: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    let stop: Stop | undefined;
    let killTimer: NodeJS.Timeout | undefined;
    /** When the SIGKILL of killTimer is due (performance.now()). */
    let killAt = 0;
    let pipeTimer: NodeJS.Timeout | undefined;
    /** When the pipes are given up on (performance.now()), once the child exited and they did not close; 0 before. */
    let stopReadingAt = 0;
    // The runner's drain may grant less than killAfterSeconds (it must be gone before the
    // kubelet's SIGKILL): an abort reason carrying killAfterMs shortens the kill sequence.
    let killAfterMs = cfg.killAfterSeconds * 1000;

    // SIGTERM now, SIGKILL after killAfterSeconds; idempotent so timeout, abort and
    // leftover cleanup can all ask for it. Before the pid is known, `spawned` calls it.
    const terminate = (): void => {
      if (pid === undefined || killTimer) return;
      const pgid = pid;
      // Its session, not only its group: a child that moved to a group of its own (`timeout`
      // run by a shell, `set -m`) ran on after the attempt was given up (signalSession).
      signalSession(pgid, 'SIGTERM');
      killAt = performance.now() + killAfterMs;
      killTimer = setTimeout(() => signalSession(pgid, 'SIGKILL'), killAfterMs);
    };
    // A drain's abort that finds the SIGTERM sent already (the attempt timed out, or the child
    // exited and what it left in its group is being ended) brings the SIGKILL forward to the
    // drain's budget: at killAfterSeconds it came after the run gave up on the attempt (handed
    // back, a success thrown away) or after the drain's last resort ended cronsafe (claims left).
    const hurryKill = (): void => {
      if (!killTimer || settled || pid === undefined || performance.now() + killAfterMs >= killAt) return;
      const pgid = pid;
      clearTimeout(killTimer);
      killAt = performance.now() + killAfterMs;
      killTimer = setTimeout(() => signalSession(pgid, 'SIGKILL'), killAfterMs);
    };
    // Read what already arrived first (the poll phase runs before setImmediate): after the
    // runner was paused past the timeout (SIGSTOP, a frozen event loop) the timer fires
    // before the helper's report that the child exited in time, which waits in its channel.
    const timeoutTimer = setTimeout(() => {
      setImmediate(() => {
        if (exited || settled) return;
        // Exited in time but its exit not reported yet (a loaded machine, a stopped helper):
        // judged by its exit status, as a drain's abort judges it (onAbort); taken as timed
        // out, an item that succeeded was charged and run again.
        if (pid === undefined || !exitedAlready(pid)) {
          stop ??= { kind: 'timeout' };
          terminate();
        }
        // Its exit unheard: the helper may be stopped (`kill -STOP $PPID`), and with it the
        // report of the exit, or of the pid, that the attempt waits for.
        child.wake();
      });
    }, cfg.timeoutSeconds * 1000);
    // Give up on the pipes `ms` from now: 'close' follows, and the attempt settles.
    const stopReadingIn = (ms: number): void => {
      clearTimeout(pipeTimer);
      stopReadingAt = performance.now() + ms;
      pipeTimer = setTimeout(() => {
        ctx.log.warn('handler exited but a process outside its group still holds its stdout/stderr; no longer reading');
        child.stopReading();
      }, ms);
    };
    const onAbort = (): void => {
      killAfterMs = killBudgetMs(ctx.signal.reason, killAfterMs);
      // Exited: judged by its exit status; only what it left in its group is still ended. So is
      // a child that exited before the abort but whose exit the helper has not reported yet
      // (late on a loaded machine): taken as interrupted, its finished output was thrown away
      // and the item run again.
      if (!exited && !(pid !== undefined && exitedAlready(pid))) {
        stop ??= { kind: 'abort', reason: ctx.signal.reason };
        terminate();
      }
      // A stopped helper (`kill -STOP $PPID`) reports the exit, or takes the kill, once woken.
      if (!exited) child.wake();
      hurryKill();
      // Exited before, its pipes held by a process that left its group (setsid): they were
      // given up on after killAfterSeconds + 2 s, past the drain's budget, as the kill was.
      // Past the SIGKILL of what is left in its group, whose end closes the pipes it holds.
      const slack = (killTimer ? Math.max(0, killAt - performance.now()) : 0) + ABORTED_PIPE_SLACK_MS;
      if (stopReadingAt > 0 && !settled && stopReadingAt - performance.now() > slack) stopReadingIn(slack);
    };
    ctx.signal.addEventListener('abort', onAbort, { once: true });

    const finish = (err?: HandlerFailure): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timeoutTimer);
      clearTimeout(killTimer);
      clearTimeout(pipeTimer);
      ctx.signal.removeEventListener('abort', onAbort);
      if (err) reject(err);
      else resolve();
    };

    // After the end (closed pipes, or the helper gone): leftovers in the group, with or
    // without our pipes, are still ours to end before the attempt settles.
    const reapThen = (settle: () => HandlerFailure | undefined, helperDied = false): void => {
      const pgid = pid;
      if (settled || pgid === undefined) return;
      void (async () => {
        // Once a kill is under way (or the helper died), a group of its own inside the child's
        // session is looked for too (/proc, not per item): `timeout` run by a shell, ignoring
        // SIGTERM or not holding the pipes, outlived the attempt when only the group was asked.
        if (groupAlive(pgid) || ((killTimer !== undefined || helperDied) && sessionAlive(pgid))) {
          // The helper no longer has the child: should cronsafe be killed before they are
          // gone, it must still end them, or they run on beside the item's retry.
          const release = child.holdGroup(pgid);
          // Ended on its own (no timeout, abort or earlier warning: no kill under way), yet a
          // process of its group lives on: one it backgrounded without waiting for, which may
          // be writing {output} still. Ending it cuts that short, so say so.
          // Its parent (the helper) died instead: the handler may well be running still, not exited.
          if (helperDied) ctx.log.warn({ pgid }, "the handler's parent process (cronsafe's helper that forks handlers) died; terminating the handler's process group");
          else if (!stop && !killTimer) ctx.log.warn({ pgid }, 'handler exited but left processes in its group; terminating them (an output they were still writing is cut short: a handler should wait for its children)');
          terminate();
          const gone = await waitGroupGone(pgid, killAfterMs + REAP_SLACK_MS);
          release();
          if (!gone) ctx.log.warn({ pgid }, 'handler process group still has live members after SIGKILL (stuck in uninterruptible I/O?)');
        }
        capture.end();
        finish(settle());
      })();
    };

    // The attempt's result from the child's exit status, once its group is gone.
    const judged = (code: number | null, signal: NodeJS.Signals | null): HandlerFailure | undefined => {
      const failure = outcome(stop, code, signal, cfg, capture.stderrTail());
      // Failed after one of the command's own files was removed (the program between the
      // kernel's exec and its interpreter's open, a script argument): the environment's
      // fault, as a spawn's ENOENT is. Asked only on failure: a few existsSync.
      const gone = failure && !stop ? ownFiles.find((f) => !existsSync(f)) : undefined;
      return gone === undefined ? failure : new EnvironmentFault(`handler.command's ${JSON.stringify(gone)} vanished during the attempt (removed mid-run?): ${failure!.message}`);
    };

    // When the child was asked for: should its pid never come back, a process started before is not it.
    const requestedAt = process.uptime();
    const child: RemoteChild = spawnChild({ ...request, file, args }, {
      spawned(p, sockets) {
        pid = p;
        if (sockets && !warnedSockets) {
          // Silent, this was a script's ENXIO on /dev/stderr with nothing to say why.
          warnedSockets = true;
          ctx.log.warn(
            { tmpdir: tmpdir() },
            "handler.command children get Unix sockets, not pipes, for stdout and stderr (no mkfifo program, or the temp directory cannot take the helper's FIFOs): a script that reopens /dev/stdout or /dev/stderr fails with ENXIO; write >&2 instead",
          );
        }
        if (stop) terminate();
      },
      // Nothing started (ENOENT, EACCES): nothing to kill or wait for.
      failed: (err) => finish(spawnFailure(file, err, cwd, programFromItem, () => whyNotRun?.(file, cwd, request.baseEnv.PATH) ?? null)),
      data: (stream, chunk) => capture.write(stream, chunk),
      exit(code, signal) {
        exited = true;
        exitStatus = { code, signal };
        clearTimeout(timeoutTimer);
        if (settled) return;
        // A process that left the group on purpose (setsid) can hold our pipes forever:
        // past the kill grace, stop reading so 'close' fires and the attempt settles. When
        // the run is draining (aborted), the kill already happened and the drain's margin is
        // short: settle soon, so that the claim is handed back before cronsafe exits.
        const pipeSlackMs = stop?.kind === 'abort' ? ABORTED_PIPE_SLACK_MS : killAfterMs + REAP_SLACK_MS;
        // 'close' (which checks the group itself) normally follows at once, the pipes closing
        // with the child: only when it does not do we look for grandchildren holding our pipes,
        // which would keep it from ever firing. Probing the group here for every item threw
        // ESRCH (~20 us) for nothing (docs/benchmarks.md, command handlers).
        pipeTimer = setTimeout(() => {
          // Its session: a process that moved to a group of its own (`timeout` run by a shell)
          // holds the pipes as well as one of its group (/proc, read only when they linger).
          if (pid !== undefined && sessionAlive(pid)) {
            ctx.log.warn({ pgid: pid }, 'handler exited but left processes in its group (or its session); terminating them');
            terminate();
          }
          // A drain's abort since the exit grants no more than it would have at the exit.
          stopReadingIn(Math.max(0, (ctx.signal.aborted ? Math.min(ABORTED_PIPE_SLACK_MS, pipeSlackMs) : pipeSlackMs) - LINGER_CHECK_MS));
        }, Math.min(LINGER_CHECK_MS, pipeSlackMs));
      },
      close(code, signal, unread, stderrTail) {
        exited = true;
        clearTimeout(pipeTimer);
        capture.unread(unread, stderrTail);
        reapThen(() => judged(code, signal));
      },
      // The helper died. Before it ran (it never started): the environment's fault, not the
      // item's. Under the attempt: the child's parent died as cronsafe crashing would, and the
      // likely killer is the child itself (`kill -9 $PPID`, `pkill node`), so the attempt is
      // charged, as a crash charges the attempts running. An environment fault instead stopped
      // every run at that item, never charged, never dead-lettered (the next helper starts on demand).
      lost(err, running) {
        clearTimeout(pipeTimer);
        // It had exited (its exit status came back) and only what it left in its group held
        // the pipes: judged by that status once they are ended, as 'close' would have.
        if (exitStatus) return reapThen(() => judged(exitStatus!.code, exitStatus!.signal));
        const charged = (): HandlerFailure =>
          stop ? outcome(stop, null, null, cfg, '')! : new HandlerFailure(`handler.command ${JSON.stringify(file)}: ${err.message} during the attempt (did the handler kill its parent process?)`);
        if (!running) {
          const message = `cannot run handler.command ${JSON.stringify(file)}: ${err.message}`;
          return finish(new NotStarted((err as NodeJS.ErrnoException).code === 'EAGAIN' ? processLimitReached(message) : message));
        }
        // Started, but the helper died before it sent the pid (`kill -9 $PPID` first thing, or
        // a kill from outside just then): found by its variables, or it would run on unended,
        // beside the item's retry and past the run's end.
        pid ??= findSessionLeader(request.extraEnv, requestedAt);
        if (pid === undefined) finish(charged());
        // Its pipes went with the helper: nothing reads what it writes, so end what is left.
        else reapThen(charged, true);
      },
    });
  });
}

/**
 * The files handler.command runs, as they are when the handler is made: the program by a
 * path, and the first literal argument that is a file, the script an interpreter is given
 * (`python3 /app/qc.py`). Resolved against the handler's working directory, as the child
 * resolves them. No later argument: a handler may remove a scratch or cache file it is
 * given, and its failure then is its own, not the environment's (the pass would stop on
 * every run and the item behind it never be dead-lettered).
 */
function commandFiles(template: readonly string[], cwd: string): string[] {
  const files: string[] = [];
  let script = false;
  template.forEach((arg, i) => {
    if (script || PLACEHOLDER_TEST.test(arg) || !arg.includes('/')) return;
    const file = path.resolve(cwd, arg);
    // The program counts even when it is not there yet (validate found it): a later removal is ours to see.
    if (i === 0) files.push(file);
    else if (isFile(file)) {
      files.push(file);
      script = true;
    }
  });
  return files;
}

function isFile(file: string): boolean {
  try {
    return statSync(file, { throwIfNoEntry: false })?.isFile() ?? false;
  } catch {
    return false; // ENOTDIR, EACCES, ELOOP: no file of ours to watch
  }
}

/** The attempt's failure, or undefined for success. A timeout or abort wins over the exit status. */
function outcome(
  stop: Stop | undefined,
  code: number | null,
  signal: NodeJS.Signals | null,
  cfg: HandlerConfig,
  tail: string,
): HandlerFailure | undefined {
  if (stop?.kind === 'abort') return interrupted(stop.reason);
  if (stop?.kind === 'timeout') return new TimedOut(cfg.timeoutSeconds);
  if (code === 0) return undefined;
  const what = signal ? `killed by ${signal}` : `exit code ${code}`;
  // Exit 128 + n is how a child that caught signal n reports it (a JVM's exit 143 on SIGTERM,
  // a script's `trap 'exit 143' TERM`): when a stop signal reached the whole process tree,
  // it was stopped by it as much as a child that died of it (judgeFailure).
  const by = signal ?? (code === null ? undefined : REPORTED_SIGNAL.get(code));
  if (by) return new KilledBySignal(tail ? `${what}: ${tail}` : what, by);
  if (code === 127 || code === 126) return new ProgramNotFound(tail ? `${what}: ${tail}` : what, code);
  return new HandlerFailure(tail ? `${what}: ${tail}` : what);
}

/** The exit codes that report a stop signal (128 + its number) and that signal. */
const REPORTED_SIGNAL = new Map<number, NodeJS.Signals>((['SIGHUP', 'SIGINT', 'SIGTERM', 'SIGALRM'] as const).map((sig) => [128 + constants.signals[sig], sig]));

/**
 * A child that never started. The environment's fault (EnvironmentFault: the pass stops,
 * nothing is charged): a missing or non-executable program, a vanished working directory,
 * no free process slots or descriptors. The item's only when the program comes from the
 * item (`{path}` in argv[0]) or its argv is too long (E2BIG).
 */
function spawnFailure(file: string, err: unknown, cwd: string, programFromItem: boolean, whyNotRun: () => string | null): HandlerFailure {
  const code = (err as NodeJS.ErrnoException).code ?? 'error';
  let hint = coerceError(err).message;
  if (code === 'ENOENT') {
    // libuv reports a missing cwd as ENOENT on the command too; say which it was. So does the
    // kernel a program that is there but whose #! interpreter (or ELF loader) is not, removed
    // since the start's check: "command not found" named a file that exists, so say what is missing.
    if (!existsSync(cwd)) hint = `working directory ${cwd} does not exist`;
    else hint = whyNotRun() ?? 'command not found';
  } else if (code === 'EACCES') {
    hint = 'permission denied (not executable?)';
  }
  const message = `cannot run handler.command ${JSON.stringify(file)}: ${code} (${hint})`;
  // No process slot left for the child: never the item's, whatever its program or argv.
  if (code === 'EAGAIN') return new NotStarted(processLimitReached(message));
  return programFromItem || code === 'E2BIG' ? new HandlerFailure(message) : new NotStarted(message);
}

/**
 * cronsafe's own fork of a handler (or of the helper that forks them) refused with EAGAIN: the
 * user's or the pod's process limit counts every process and thread, cronsafe's, the helpers'
 * and the handlers' children alike, so it is the environment's, as EMFILE is: said as such,
 * where "spawn sh EAGAIN" alone named neither the limit nor what to do.
 */
function processLimitReached(message: string): string {
  return `the process limit (pids.max of the pod / ulimit -u) is reached: ${message}; stopping, nothing charged (raise the limit or lower concurrency: every handler's own children count too)`;
}
