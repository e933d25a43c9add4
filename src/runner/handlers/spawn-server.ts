import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { TAIL_BYTES } from './capture.js';
import { holdDir, removeDeadDirs } from './dead-dirs.js';
import { HELPER_FLAG } from './process-group.js';

/** FIFO pairs the helper makes at a time (one mkfifo(1) for them). */
const FIFO_BATCH = 8;
/** After mkfifo(1) failed (a pids limit, a full temp directory): sockets for this long, then FIFOs again. */
const FIFO_RETRY_MS = 10_000;

/**
 * Command handlers' children are forked by a small helper process, not by cronsafe itself.
 *
 * Why: libuv forks synchronously on the calling thread and waits there until the child has
 * called exec. fork copies the caller's page tables and exec tears the copy down again, so a
 * spawn costs in proportion to the caller's memory: cronsafe, with its ledger, bundle and
 * logger, has about 1.7x the anonymous memory of a bare Node loop, and spawning from it ran
 * at 0.60x a bare loop's rate (docs/benchmarks.md, command handlers). The helper is a bare
 * `node -e` with nothing loaded but child_process; it forks at a bare loop's cost, on the
 * other core, while cronsafe's thread goes on with the ledger.
 *
 * What stays in cronsafe: the process-group kills (the helper reports the pid; the group id
 * is the pid, because the child is spawned `detached`), the timeouts, the drain, the output
 * capture and the exit status. The helper only forks, forwards the child's output bytes and
 * reports its exit and the close of its pipes, in order, over one IPC channel.
 */

/** What the helper tells about one child, in the order it happens. */
export interface ChildEvents {
  /** The child runs; its pid is also its process group id. */
  /** `sockets`: its stdout and stderr are Unix sockets, not FIFOs (no mkfifo, no writable temp directory). */
  spawned(pid: number, sockets: boolean): void;
  /** The child never started (no pid): `err.code` is the errno name (ENOENT, EACCES, ...). */
  failed(err: NodeJS.ErrnoException): void;
  data(stream: 'stdout' | 'stderr', chunk: Buffer): void;
  exit(code: number | null, signal: NodeJS.Signals | null): void;
  /**
   * The child exited and its stdout and stderr closed; `exit` may not have been called
   * before. `unread`: bytes past maxLogBytes, not forwarded; `stderrTail`: the last of them on stderr.
   */
  close(code: number | null, signal: NodeJS.Signals | null, unread: number, stderrTail: Buffer): void;
  /**
   * The helper died: nothing more will be heard about this child. `running`: the helper had
   * started and taken requests, so this child was (as good as) started, whether or not its
   * pid came back: a child can kill the helper (`kill -9 $PPID`) before the pid is sent.
   */
  lost(err: Error, running: boolean): void;
}

export interface SpawnRequest {
  file: string;
  args: string[];
  cwd: string;
  /** The environment shared by every spawn of one handler; sent to the helper once. */
  baseEnv: NodeJS.ProcessEnv;
  /** Variables added to (or replacing) baseEnv's for this child. */
  extraEnv: Record<string, string>;
  /** Output bytes to forward (handler.maxLogBytes); past them only counts and stderr's tail. */
  maxLogBytes: number;
}

export interface RemoteChild {
  /** Stop reading the child's stdout and stderr (a process outside the group holds them): 'close' follows. */
  stopReading(): void;
  /**
   * After 'close', while cronsafe ends what the child left in its group: should cronsafe die
   * meanwhile, the helper ends the group too, as it does a running child's. Returns the release.
   */
  holdGroup(pgid: number): () => void;
  /**
   * Resume the helper should it be stopped (a child's `kill -STOP $PPID`): stopped, it reports
   * nothing, and the attempt waited past its timeout, and a drain's deadline, for ever.
   */
  wake(): void;
}

// The helper program (CommonJS for `node -e`). The exit is reported when the pipes have not
// closed by the next turn of the helper's loop; usually they close with the child, and one
// message (z: 2) says both. Back-pressure: when the channel to cronsafe
// backs up, the helper stops reading that child's pipes until the backlog is written, so a
// child that floods its stdout costs the helper a bounded amount of memory.
const HELPER_SOURCE = `'use strict';
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const envs = new Map();
const kids = new Map();
const paused = new Set();
const held = new Set();
let backlog = 0;
const written = () => {
  if (--backlog === 0 && paused.size > 0) { for (const s of paused) s.resume(); paused.clear(); }
};
function send(m, stream) {
  if (!process.connected) return;
  backlog++;
  if (!process.send(m, undefined, undefined, written) && stream) { stream.pause(); paused.add(stream); }
}
// The child's stdout and stderr are FIFOs (named pipes), not the Unix sockets Node gives a
// child: a script that reopens them (echo oops > /dev/stderr, tee /dev/stdout) works as
// under cron, where a socket fails with ENXIO. Made with mkfifo(1) in a private directory,
// a few at a time, and used again once a child's pipes reached their end (no writer left).
// Without mkfifo or a writable temp directory, sockets as before.
const C = fs.constants;
// fifoOffUntil: after a failure, sockets until then (Infinity: no mkfifo at all). A temp
// directory that cannot be made now (missing, full) is tried again at the next child.
let fifoDir, fifoOffUntil = 0, made = 0;
const free = [];
// A name is opened only when it is still our FIFO (not followed if a link, of our user, both
// ends the same inode). The directory can be emptied or removed under us (a handler cleaning
// /tmp, systemd-tmpfiles' age limit on an idle daemon) and a name made again by someone else:
// then the FIFOs are made anew in a new directory, the old one removed if it is still ours.
const uid = process.getuid();
let dirIno;
const ownDir = () => { try { const st = fs.lstatSync(fifoDir); return st.isDirectory() && st.uid === uid && st.ino === dirIno; } catch { return false; } };
function fifoPair() {
  for (let tries = 0; tries < 2 && Date.now() >= fifoOffUntil; tries++) {
    const io = tryPair();
    if (io !== 'stale') return io;
    if (ownDir()) try { fs.rmSync(fifoDir, { recursive: true, force: true }); } catch {}
    fifoDir = undefined; free.length = 0;
  }
  return null;
}
// A pair read to its end serves the next child, if it is of the directory in use.
function release(io) {
  if (io.dir === fifoDir) free.push(io.pair);
  else for (const name of io.pair) try { fs.unlinkSync(name); } catch {}
}
function tryPair() {
  try {
    // Not ours any more (removed, made again by someone else, who could swap a name between
    // the two opens below for a FIFO nobody reads, on which the second would block for good).
    if (fifoDir && !ownDir()) return 'stale';
    if (free.length === 0) {
      // Told to cronsafe, which removes it should the helper be killed (kill -9 $PPID, the
      // OOM killer) and never reach its exit handler below, and holds it (flock) while it
      // lives: should both be killed, a later run removes it (removeDeadFifoDirs).
      if (!fifoDir) {
        try {
          fifoDir = fs.mkdtempSync(require('node:path').join(require('node:path').resolve(require('node:os').tmpdir()), 'cronsafe-io-'));
        } catch { return null; }
        dirIno = fs.lstatSync(fifoDir).ino;
        send({ dir: fifoDir });
      }
      const names = [];
      for (let n = 0; n < ${FIFO_BATCH}; n++, made++) names.push(fifoDir + '/' + made + 'o', fifoDir + '/' + made + 'e');
      const r = spawnSync('mkfifo', ['-m', '600', ...names], { stdio: 'ignore' });
      if (r.error && r.error.code === 'ENOENT') { fifoOffUntil = Infinity; return null; }
      if (r.status !== 0) throw new Error('mkfifo');
      for (let n = 0; n < names.length; n += 2) free.push([names[n], names[n + 1]]);
    }
  } catch { fifoOffUntil = Date.now() + ${FIFO_RETRY_MS}; return null; }
  const pair = free.pop();
  const fds = [];
  try {
    for (const name of pair) {
      const r = fs.openSync(name, C.O_RDONLY | C.O_NONBLOCK | C.O_NOFOLLOW);
      fds.push(r);
      const w = fs.openSync(name, C.O_WRONLY | C.O_NOFOLLOW);
      fds.push(w);
      const a = fs.fstatSync(r), b = fs.fstatSync(w);
      if (!a.isFIFO() || a.uid !== uid || a.ino !== b.ino || a.dev !== b.dev) throw new Error('not our FIFO');
    }
  } catch (e) {
    for (const fd of fds) fs.closeSync(fd);
    for (const name of pair) try { fs.unlinkSync(name); } catch {}
    // Out of descriptors: sockets for this child. Otherwise the name was removed or replaced.
    return e.code === 'EMFILE' || e.code === 'ENFILE' ? null : 'stale';
  }
  return { pair, dir: fifoDir, readO: fds[0], writeO: fds[1], readE: fds[2], writeE: fds[3] };
}
process.on('exit', () => { if (fifoDir) try { fs.rmSync(fifoDir, { recursive: true, force: true }); } catch {} });
process.on('message', (m) => {
  if (m.env) { envs.set(m.k, m.env); return; }
  if (m.g) { if (m.u) held.delete(m.g); else held.add(m.g); return; }
  if (m.d) { const c = kids.get(m.i); if (c) { c.out.destroy(); c.err.destroy(); } return; }
  const i = m.i;
  const io = fifoPair();
  let child;
  try {
    // Spread, not Object.assign: an inherited variable named __proto__ is a key to copy, not a prototype to set.
    child = spawn(m.f, m.a, { cwd: m.c, env: { ...envs.get(m.k), ...m.e }, stdio: io ? ['ignore', io.writeO, io.writeE] : ['ignore', 'pipe', 'pipe'], detached: true });
  } catch (err) {
    if (io) { for (const fd of [io.readO, io.writeO, io.readE, io.writeE]) fs.closeSync(fd); release(io); }
    send({ i, f: (err && err.code) || 'error', m: String(err && err.message) });
    return;
  }
  // The child has its copies of the write ends: with ours closed, the reads end when its
  // (and whatever it left behind holding them) are closed.
  if (io) { fs.closeSync(io.writeO); fs.closeSync(io.writeE); }
  const out = io ? new net.Socket({ fd: io.readO, readable: true, writable: false }) : child.stdout;
  const err = io ? new net.Socket({ fd: io.readE, readable: true, writable: false }) : child.stderr;
  child.on('error', (e) => { if (child.pid === undefined) send({ i, f: e.code || 'error', m: e.message }); });
  if (child.pid === undefined) { if (io) { out.destroy(); err.destroy(); release(io); } return; }
  kids.set(i, { pid: child.pid, out, err });
  send(io ? { i, p: child.pid } : { i, p: child.pid, u: 1 });
  // Past the log budget (m.b) bytes are only counted, and the last of stderr kept for the
  // failure message: a child that floods its pipes is drained at the pipes' speed.
  let room = m.b, dropped = 0, tail = Buffer.alloc(0);
  const read = (key, stream) => (b) => {
    if (room > 0) { room -= b.length; send({ i, [key]: b.toString('latin1') }, stream); return; }
    dropped += b.length;
    if (key === 'r') tail = Buffer.concat([tail, b]).subarray(-${TAIL_BYTES});
  };
  out.on('data', read('o', out));
  err.on('data', read('r', err));
  // Closed: the child exited and both pipes closed. A pipe read to its end has no writer
  // left, so its FIFO serves the next child; one cut short (stopReading) may, so it goes.
  let exit, code, signal, left = 3, ends = 0;
  const closed = () => {
    if (--left > 0) return;
    kids.delete(i); paused.delete(out); paused.delete(err);
    if (io) { if (ends === 2) release(io); else for (const name of io.pair) try { fs.unlinkSync(name); } catch {} }
    if (exit) clearImmediate(exit);
    send({ i, z: exit ? 2 : 1, x: code, s: signal, n: dropped, t: tail.toString('latin1') });
  };
  for (const s of [out, err]) { s.on('end', () => ends++); s.on('close', closed); }
  child.on('exit', (c, sig) => {
    code = c; signal = sig;
    exit = setImmediate(() => { exit = undefined; send({ i, x: c, s: sig }); });
    closed();
  });
});
// cronsafe is gone (it exited, or was killed alone: the OOM killer, kill -9). Nobody will
// record these attempts, and the next run charges and runs them again, so they must not
// run on beside it: their groups end with the helper.
// A group of its own inside a child's session (\`timeout\` run by a shell, \`set -m\`) too: the
// child leads its session, whose id is its pid; only setsid leaves it (process-group.ts).
process.on('disconnect', () => {
  const sessions = new Set([...[...kids.values()].map((c) => c.pid), ...held]);
  const groups = new Set(sessions);
  try {
    for (const name of fs.readdirSync('/proc')) {
      if (!/^[0-9]+$/.test(name)) continue;
      try {
        const st = fs.readFileSync('/proc/' + name + '/stat', 'utf8');
        const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
        if (sessions.has(Number(f[3])) && Number(f[2]) > 1) groups.add(Number(f[2]));
      } catch {}
    }
  } catch {}
  for (const g of groups) { try { process.kill(-g, 'SIGKILL'); } catch {} }
  // Its stderr is cronsafe's: a terminal that hung up made Node's exit abort (src/hung-up-tty.ts).
  try { const st = fs.fstatSync(2); if (st.isCharacterDevice() && ((st.rdev >> 8) & 0xfff) !== 1 && !require('node:tty').isatty(2)) fs.closeSync(2); } catch {}
  process.exit(0);
});
// A stop signalled to every process at once (systemd's KillMode=control-group) is cronsafe's
// to drain: the helper must outlive it to report its children. It ends with cronsafe (above).
// SIGUSR1 would start Node's inspector, a debugger on 127.0.0.1:9229 that anyone on the
// loopback could use to run code as the helper (cli.ts ignores it for cronsafe likewise).
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGALRM', 'SIGUSR1']) process.on(sig, () => {});
send({ ready: 1 });
`;

interface HelperMessage {
  i: number;
  ready?: 1;
  /** The directory of its FIFOs, made: removed here should the helper die without removing it. */
  dir?: string;
  p?: number;
  /** With p: the child's stdout and stderr are sockets (no FIFOs to be had). */
  u?: 1;
  f?: string;
  m?: string;
  o?: string;
  r?: string;
  x?: number | null;
  s?: NodeJS.Signals | null;
  n?: number;
  t?: string;
  /** 1: the pipes closed after an exit already reported; 2: exit and close at once. */
  z?: 1 | 2;
}

class SpawnServer {
  readonly #helper: ChildProcess;
  readonly #children = new Map<number, ChildEvents>();
  readonly #envIds = new WeakMap<NodeJS.ProcessEnv, number>();
  #nextEnv = 0;
  #next = 0;
  #dead: Error | undefined;
  /** It said it was ready: it had started and reads the requests sent to it. */
  #wasReady = false;
  #readyTimer: NodeJS.Timeout | undefined;
  #notStarted = false;
  #onReady: (() => void) | undefined;
  #fifoDir: string | undefined;
  /** #fifoDir held (flock) while cronsafe lives: see removeDeadFifoDirs. */
  #fifoDirHeld: number | undefined;
  /** Settles when the helper can take requests, or is dead (never rejects). */
  readonly ready: Promise<void>;

  constructor(onDeath: () => void) {
    this.ready = new Promise<void>((resolve) => (this.#onReady = resolve));
    // Its own session (detached): a terminal's Ctrl-C or a signal to cronsafe's group must not
    // kill the helper while cronsafe drains. It exits when cronsafe's end of the channel closes
    // (cronsafe exited or was killed), killing the process groups of the children it still
    // has. cronsafe's environment (a node that needs LD_LIBRARY_PATH still starts) without
    // NODE_OPTIONS, whose --require or --import are meant for cronsafe, not for a helper
    // whose output nobody reads.
    const env = { ...process.env };
    delete env.NODE_OPTIONS;
    this.#helper = spawn(process.execPath, [HELPER_FLAG, '-e', HELPER_SOURCE], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      detached: true,
      env,
      serialization: 'json',
    });
    this.#helper.on('message', (m: HelperMessage) => this.#receive(m));
    // A helper that never says it is ready (Node could not make its threads: a low
    // `ulimit -u` or pod pids limit, which count threads) would hold the run's start, or an
    // attempt, forever, and outlive cronsafe (it is detached and never reads its channel):
    // killed, it dies as one that failed to start (the environment's fault, nothing charged).
    this.#readyTimer = setTimeout(() => {
      this.#notStarted = true;
      this.#helper.kill('SIGKILL');
    }, READY_TIMEOUT_MS);
    this.#readyTimer.unref();
    const die = (why: string, code?: string): void => {
      if (this.#dead) return;
      clearTimeout(this.#readyTimer);
      if (this.#notStarted) why = `did not start within ${READY_TIMEOUT_MS / 1000} s (no thread or process left for it? a low ulimit -u or pids limit): killed`;
      // Its fork refused (EAGAIN: the process limit; the error's code tells the attempt that),
      // or Node in it aborting before it was ready, which is what it does when it cannot make
      // its threads (a process limit counts them): "exited (SIGABRT)" alone said neither.
      // (Node's own report of that abort, on the stderr it shares, comes before this.)
      else if (!this.#wasReady && code === 'SIGABRT') why += ' before it was ready (Node aborts so when it cannot make its threads: the process limit, pids.max of the pod / ulimit -u, reached?)';
      this.#dead = Object.assign(new Error(`the process that starts handler.command children ${why}`), code === 'EAGAIN' ? { code } : {});
      this.#onReady?.();
      onDeath();
      this.removeFifoDir();
      const lost = [...this.#children.values()];
      this.#children.clear();
      for (const c of lost) c.lost(this.#dead, this.#wasReady);
    };
    this.#helper.on('error', (err: NodeJS.ErrnoException) => die(`failed: ${err.message}`, err.code));
    this.#helper.on('exit', (code, signal) => die(`exited (${signal ?? `code ${code}`})`, signal ?? undefined));
    // Held until it is ready: startHelpers() awaits that, and nothing else may keep the loop alive.
    this.#busy();
  }

  /** At cronsafe's exit: a helper that never started cannot see its channel close, so it is killed. */
  killIfNotStarted(): void {
    if (!this.#wasReady && !this.#dead) this.#helper.kill('SIGKILL');
  }

  get inFlight(): number {
    return this.#children.size;
  }

  spawn(req: SpawnRequest, events: ChildEvents): RemoteChild {
    const i = this.#next++;
    if (this.#children.size === 0) this.#busy();
    this.#children.set(i, events);
    // No channel: the helper itself could not be spawned (EMFILE, ENFILE: Node gives it no
    // `send` then, and reports the error on the next tick). Its death reports this child
    // lost before it ran, the environment's fault; sent to, it threw a TypeError that was
    // charged to the item as its handler's failure.
    if (this.#helper.connected) {
      let k = this.#envIds.get(req.baseEnv);
      if (k === undefined) {
        k = this.#nextEnv++;
        this.#envIds.set(req.baseEnv, k);
        this.#helper.send({ k, env: req.baseEnv });
      }
      this.#helper.send({ i, f: req.file, a: req.args, c: req.cwd, k, e: req.extraEnv, b: req.maxLogBytes });
    }
    return {
      stopReading: () => void (this.#children.has(i) && this.#helper.send({ i, d: 1 })),
      holdGroup: (g) => {
        if (!this.#send({ g })) return () => undefined;
        return () => void this.#send({ g, u: 1 });
      },
      wake: () => this.wake(),
    };
  }

  /** SIGCONT to the helper: nothing to a running one; a stopped one reports what it holds. */
  wake(): void {
    if (this.#dead || this.#helper.pid === undefined) return;
    try {
      process.kill(this.#helper.pid, 'SIGCONT');
    } catch {
      /* gone: its 'exit' reports that */
    }
  }

  /** A message to a helper that may be gone (then nothing is sent: its 'exit' reports that). */
  #send(m: object): boolean {
    if (this.#dead || !this.#helper.connected) return false;
    this.#helper.send(m);
    return true;
  }

  #receive(m: HelperMessage): void {
    if (m.dir !== undefined) {
      this.#release();
      this.#fifoDir = m.dir;
      this.#fifoDirHeld = holdDir(m.dir);
      // Its exit can be seen before this message, read from the channel after it.
      if (this.#dead) this.removeFifoDir();
      return;
    }
    if (m.ready) {
      this.#wasReady = true;
      clearTimeout(this.#readyTimer);
      if (this.#children.size === 0) this.#idle();
      return this.#onReady?.();
    }
    const c = this.#children.get(m.i);
    if (!c) return;
    if (m.o !== undefined) c.data('stdout', Buffer.from(m.o, 'latin1'));
    else if (m.r !== undefined) c.data('stderr', Buffer.from(m.r, 'latin1'));
    else if (m.p !== undefined) c.spawned(m.p, m.u === 1);
    else if (m.z !== undefined) {
      this.#settled(m.i);
      c.close(m.x ?? null, m.s ?? null, m.n ?? 0, Buffer.from(m.t ?? '', 'latin1'));
    } else if (m.f !== undefined) {
      this.#settled(m.i);
      c.failed(Object.assign(new Error(m.m ?? m.f), { code: m.f }));
    } else c.exit(m.x ?? null, m.s ?? null);
  }

  /**
   * A helper killed (SIGKILL: kill -9 $PPID, the OOM killer) never reaches its exit handler,
   * which removes its FIFOs' directory: left in the temp directory, one more per death. At
   * cronsafe's exit too: the helper removes it only after, and in a container it is killed
   * with the rest when cronsafe, the init's only child, is gone.
   */
  removeFifoDir(): void {
    if (this.#fifoDir === undefined) return;
    try {
      rmSync(this.#fifoDir, { recursive: true, force: true });
    } catch {
      /* not removable (its parent made read-only meanwhile): only FIFOs, no data, are left */
    }
    this.#release();
  }

  /** Let go of the FIFOs' directory (removed, or replaced by the helper with a new one). */
  #release(): void {
    if (this.#fifoDirHeld === undefined) return;
    closeSync(this.#fifoDirHeld);
    this.#fifoDirHeld = undefined;
  }

  #settled(i: number): void {
    this.#children.delete(i);
    if (this.#children.size === 0) this.#idle();
  }

  // While no child is in flight the helper must not keep cronsafe's event loop alive.
  #busy(): void {
    this.#helper.ref();
    this.#helper.channel?.ref();
  }

  #idle(): void {
    this.#helper.unref();
    this.#helper.channel?.unref();
  }
}

// Two helpers: each blocks while its child gets from fork to exec, so with two, one forks
// while the other waits (measured: ~1.5x one helper's rate on 2 cores, docs/benchmarks.md).
const HELPERS = Math.max(1, Math.min(2, availableParallelism()));
const servers: SpawnServer[] = [];

/** How long a helper may take to start (Node's start-up: ~0.1 s, seconds on a loaded node). */
const READY_TIMEOUT_MS = 15_000;

let killAtExit = false;

function addServer(): SpawnServer {
  if (!killAtExit) {
    killAtExit = true;
    process.once('exit', () => {
      for (const s of servers) {
        s.killIfNotStarted();
        // A stopped helper would never see its channel close: it stayed, stopped, for good,
        // with the process groups of the children it still had and cronsafe's stderr.
        s.wake();
        s.removeFifoDir();
      }
    });
  }
  const s: SpawnServer = new SpawnServer(() => {
    const at = servers.indexOf(s);
    if (at !== -1) servers.splice(at, 1);
  });
  servers.push(s);
  return s;
}

/**
 * Start the helpers and wait until they take requests (or died: then the first attempt
 * starts one and fails as the environment's fault if it cannot). Before a run claims: an
 * attempt is charged when its handler starts, and a helper still booting (~0.1 s of Node
 * start-up) would widen the window in which a kill charges an attempt that never ran.
 */
export async function startHelpers(): Promise<void> {
  removeDeadFifoDirs();
  while (servers.length < HELPERS) addServer();
  await Promise.all(servers.map((s) => s.ready));
}

const FIFO_DIR_NAME = /^cronsafe-io-[A-Za-z0-9]{6}$/;
let swept = false;

/**
 * Remove, once per process, the FIFOs' directories that killed runs left in TMPDIR. The
 * helper removes its own when cronsafe dies alone, and cronsafe removes a dead helper's;
 * but when both are killed at once (the OOM killer or a stop that kills the whole cgroup,
 * systemd's final SIGKILL, an evicted pod whose /tmp is a host path) nobody did, and on a
 * host (plain cron, a systemd timer, `cronsafe daemon`) they piled up in /tmp, one per kill.
 * Each live run holds its helpers' directories (flock), so only a killed run's are taken,
 * whichever job made them; a directory that holds anything but FIFOs is not ours.
 */
function removeDeadFifoDirs(): void {
  if (swept) return;
  swept = true;
  removeDeadDirs(tmpdir(), FIFO_DIR_NAME, (e) => e.isFIFO());
}

/** Start `req` as a child in its own process group; events arrive on `events`. */
export function spawnChild(req: SpawnRequest, events: ChildEvents): RemoteChild {
  let pick: SpawnServer | undefined;
  for (const s of servers) if (!pick || s.inFlight < pick.inFlight) pick = s;
  if (!pick || (pick.inFlight > 0 && servers.length < HELPERS)) pick = addServer();
  return pick.spawn(req, events);
}
