/**
 * vitest globalSetup (vitest.config.ts): one temporary directory per test run, removed when
 * the run ends. Before, every workspace, chart values file, fake API server's kubeconfig,
 * PostgreSQL server and CLI child (its FIFOs, its links) made its own directory directly in
 * /tmp and most were never removed: each `npm test` left thousands behind, and a developer's
 * or CI's /tmp filled up run after run. Cleaning up in each of the hundreds of call sites
 * would miss the next one written; instead TMPDIR points into this run's directory for the
 * workers (vitest forks them from this process's environment, after this setup) and for
 * everything they spawn, so `os.tmpdir()` and `mktemp` land there. A test that sets TMPDIR
 * itself still gets its own.
 *
 * The directory is flocked while the run lives: a run that was killed (SIGKILL, a CI
 * timeout), whose teardown never ran, leaves its directory unheld, and the next run removes
 * it. A live run's is never removed, whichever worktree or checkout it runs from.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, closeSync, existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { holdDir as hold } from '../../src/runner/handlers/dead-dirs.js';

const PREFIX = 'cronsafe-tests-';
/** A name mkdtemp made from PREFIX. */
const NAME = /^cronsafe-tests-[A-Za-z0-9]{6}$/;
/** An unheld directory younger than this may be a run's between its mkdtemp and its flock. */
const DEAD_AFTER_MS = 60_000;

export default function setup(): () => void {
  const base = tmpdir();
  removeDeadRoots(base);
  const root = mkdtempSync(path.join(base, PREFIX));
  const held = hold(root);
  // Like /tmp itself: tests run the CLI as nobody (users.ts) and PostgreSQL runs as
  // postgres, and each must be able to make its own directories here.
  chmodSync(root, 0o1777);
  const before = process.env.TMPDIR;
  process.env.TMPDIR = root;
  return () => {
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
    removeTree(root);
    if (held !== undefined) closeSync(held);
  };
}

/** The directories of runs that died before their teardown: ours, a minute old, held by nobody. */
function removeDeadRoots(base: string): void {
  let names: string[];
  try {
    names = readdirSync(base).filter((n) => NAME.test(n));
  } catch {
    return;
  }
  for (const name of names) {
    const dir = path.join(base, name);
    try {
      const st = lstatSync(dir);
      if (!st.isDirectory() || st.uid !== process.getuid?.() || Date.now() - st.mtimeMs < DEAD_AFTER_MS) continue;
      const fd = hold(dir);
      if (fd === undefined) continue; // a live run's (or no flock here)
      try {
        removeTree(dir);
      } finally {
        closeSync(fd);
      }
    } catch {
      // Gone meanwhile.
    }
  }
}

/** Mount points at or under `dir` (a test's bind mount left mounted when it failed), deepest first. */
function mountsUnder(dir: string): string[] {
  let real: string;
  try {
    real = realpathSync(dir);
  } catch {
    return [];
  }
  let info: string;
  try {
    info = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return [];
  }
  const points = info
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((p): p is string => p !== undefined)
    // Spaces and the like are octal escapes in mountinfo (\040).
    .map((p) => p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))))
    .filter((p) => p === real || p.startsWith(`${real}/`));
  return points.sort((a, b) => b.length - a.length);
}

/**
 * Remove `dir` and everything in it, robustly. Never through a mount point (what is mounted
 * there is not ours: a test's bind mount left when it failed is unmounted first, and rm
 * stays on this file system). Trees deeper than PATH_MAX, which tests make, are out of
 * reach of Node's rmSync but not of rm(1). Directories a test made read-only (chmod 0500 or
 * 0000) stop rm when not run as root: given back their rights, and removed again.
 */
function removeTree(dir: string): void {
  for (const m of mountsUnder(dir)) spawnSync('umount', ['-l', m], { stdio: 'ignore' });
  const rm = () => spawnSync('rm', ['-rf', '--one-file-system', '--', dir], { stdio: 'ignore' });
  rm();
  if (!existsSync(dir)) return;
  spawnSync('chmod', ['-R', 'u+rwx', '--', dir], { stdio: 'ignore' });
  rm();
  if (existsSync(dir)) console.warn(`[tmp-root] could not remove ${dir}${mountsUnder(dir).length > 0 ? ` (still mounted under it: ${mountsUnder(dir).join(', ')})` : ''}`);
}
