import { readFileSync } from 'node:fs';
import { endianness } from 'node:os';
import type { KeyProblem } from './messages.js';
import { PLACEHOLDER_ENV } from './placeholders.js';

/**
 * Linux's limits on what execve(2) takes, which every handler.command child goes through:
 * no single argv or environment string over MAX_ARG_STRLEN (32 pages, 128 KiB with 4 KiB
 * pages), and all of them, with a pointer each, within a quarter of the stack limit
 * (`ulimit -s`), at most 6 MiB and at least 128 KiB. Past either, every spawn fails with
 * E2BIG, which charged every item until the backlog was dead-lettered; what the config
 * holds (handler.env, handler.command's literal text) is checked here, so that is exit 78.
 */

/** The limits, read from the kernel only when a size calls for them (start-up speed, issue 13). */
export interface ExecLimits {
  /** MAX_ARG_STRLEN, or undefined when the page size cannot be read (nothing is refused then). */
  maxString(): number | undefined;
  /** Bytes of strings and pointers one exec may take, or undefined when the stack limit cannot be read. */
  maxTotal(): number | undefined;
}

/** MAX_ARG_STRLEN and the floor of the total (ARG_MAX) with the smallest page Linux has: nothing smaller is ever refused. */
const MIN_MAX_STRING = 32 * 4096;
const POINTER = 8;
/**
 * The variables the runner adds for every item (runner/handlers/exec.ts): counted by name
 * only. CRONSAFE_OUTPUT_PATH is set only with output.directory, so not in the least a child gets.
 */
const ITEM_VARS = Object.keys(PLACEHOLDER_ENV).filter((name) => name !== 'CRONSAFE_OUTPUT_PATH');
const PLACEHOLDER = /\{(path|id|output|attempt)\}/g;

/**
 * Why handler.command's children could never start because of their argv or environment's
 * size: one problem per string too long, else one for the whole. Sizes are the least the
 * child gets (placeholders count as empty), so nothing that fits is refused. The
 * environment is the child's: cronsafe's own (`env`) as runner/handlers/exec.ts passes it on,
 * plus handler.env.
 */
export function execSizeProblems(command: readonly string[], handlerEnv: Readonly<Record<string, string>>, env: NodeJS.ProcessEnv = process.env, limits: ExecLimits = kernelLimits): KeyProblem[] {
  const problems: KeyProblem[] = [];
  // A C string's size: its bytes and the NUL. A UTF-16 unit is at most 3 bytes of UTF-8: a
  // string that short cannot be over the least limit, and is not measured (start-up speed).
  const size = (s: string): number => (s.length * 3 < MIN_MAX_STRING ? s.length : Buffer.byteLength(s)) + 1;
  const tooLong = (bytes: number): number | undefined => {
    if (bytes <= MIN_MAX_STRING) return undefined;
    const max = limits.maxString();
    return max !== undefined && bytes > max ? max : undefined;
  };
  command.forEach((arg, i) => {
    const bytes = size(arg.replace(PLACEHOLDER, ''));
    const max = tooLong(bytes);
    if (max !== undefined) {
      problems.push({ key: `handler.command[${i}]`, message: `is ${bytes - 1} bytes long; Linux takes no argument over ${max - 1} bytes (MAX_ARG_STRLEN): every handler would fail to start (E2BIG)` });
    }
  });
  for (const [name, value] of Object.entries(handlerEnv)) {
    const bytes = size(`${name}=${value}`);
    const max = tooLong(bytes);
    if (max !== undefined) {
      // The value is not shown: it may be a secret.
      problems.push({ key: `handler.env.${name}`, message: `is ${bytes - 1} bytes as NAME=value; Linux takes no environment string over ${max - 1} bytes (MAX_ARG_STRLEN): every handler would fail to start (E2BIG)` });
    }
  }
  if (problems.length > 0) return problems;

  const childEnv: Record<string, string | undefined> = { ...env };
  delete childEnv.CRONSAFE_STATE_POSTGRES;
  Object.assign(childEnv, handlerEnv);
  // Set per item only with output.directory: not counted.
  delete childEnv.CRONSAFE_OUTPUT_PATH;
  for (const name of ITEM_VARS) childEnv[name] = '';
  const strings = [command[0] ?? '', ...command.map((arg) => arg.replace(PLACEHOLDER, ''))];
  for (const name in childEnv) {
    const value = childEnv[name];
    if (value !== undefined) strings.push(`${name}=${value}`);
  }
  // Measured in bytes only when that could matter: 3 bytes a unit bounds them from above.
  let total = strings.length * POINTER;
  for (const s of strings) total += s.length * 3 + 1;
  if (total <= MIN_MAX_STRING) return problems;
  total = strings.length * POINTER;
  for (const s of strings) total += Buffer.byteLength(s) + 1;
  const max = limits.maxTotal();
  if (max !== undefined && total > max) {
    const key = Object.keys(handlerEnv).length > 0 ? 'handler.env' : 'handler.command';
    problems.push({
      key,
      message: `the handler's argv and environment (cronsafe's own environment and handler.env) come to at least ${total} bytes, over the ${max} Linux allows one program (a quarter of the stack limit, ulimit -s, at most 6 MiB): every handler would fail to start (E2BIG)`,
    });
  }
  return problems;
}

const kernelLimits: ExecLimits = {
  maxString: () => {
    const page = pageSize();
    return page === undefined ? undefined : 32 * page;
  },
  maxTotal: () => {
    const stack = stackLimit();
    if (stack === undefined) return undefined;
    // fs/exec.c, bprm_stack_limits: min(stack / 4, _STK_LIM / 4 * 3), at least ARG_MAX.
    return Math.max(Math.min(stack / 4, ((8 * 1024 * 1024) / 4) * 3), MIN_MAX_STRING);
  },
};

/** AT_PAGESZ from the auxiliary vector (/proc/self/auxv: pairs of native words). */
function pageSize(): number | undefined {
  try {
    const auxv = readFileSync('/proc/self/auxv');
    const word = process.arch === 'ia32' || process.arch === 'arm' ? 4 : 8;
    const le = endianness() === 'LE';
    const read = (at: number): number =>
      word === 4 ? (le ? auxv.readUInt32LE(at) : auxv.readUInt32BE(at)) : Number(le ? auxv.readBigUInt64LE(at) : auxv.readBigUInt64BE(at));
    for (let at = 0; at + 2 * word <= auxv.length; at += 2 * word) {
      const type = read(at);
      if (type === 0) break;
      if (type === 6) return read(at + word);
    }
  } catch {
    /* no /proc: not refused */
  }
  return undefined;
}

/** The soft RLIMIT_STACK in bytes (Infinity when unlimited), from /proc/self/limits. */
function stackLimit(): number | undefined {
  try {
    const line = /^Max stack size\s+(\S+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    if (!line) return undefined;
    return line[1] === 'unlimited' ? Infinity : Number(line[1]);
  } catch {
    return undefined;
  }
}
