import { closeSync, openSync, readSync } from 'node:fs';
import path from 'node:path';
// PLACEHOLDER: one in argv[0] (`{path}`: run the item itself) can only be checked per item.
import { PLACEHOLDER, SCRIPT_NAME } from '../handler-args.js';
import { envProblem } from './env-line.js';
import { accessProblem, crlf, DEFAULT_PATH, onPath, pathDirs, statOf } from './exec-path.js';

/**
 * Why `program` (handler.command's argv[0]) cannot be run, or null when it can. Resolved
 * as spawn will: a name with a `/` is a path (relative ones against `cwd`, the handler's
 * working directory, which is source.directory); a bare name is looked up on `PATH` (the
 * child's: handler.env's PATH wins over cronsafe's own). It must be a file with execute
 * permission for us.
 */
export function programProblem(program: string, cwd: string, childPATH: string | undefined): string | null {
  if (PLACEHOLDER.test(program)) return null;
  // No PATH at all: spawn (libuv) searches the default path, as execvp does, not nothing.
  const PATH = childPATH ?? DEFAULT_PATH;
  if (program.includes('/')) {
    const file = path.resolve(cwd, program);
    const problem = fileProblem(file, cwd, PATH);
    return problem && `${JSON.stringify(program)}${file === program ? '' : ` (${file})`} ${problem}`;
  }
  const found = onPath(program, cwd, PATH);
  if (found) {
    const problem = formatProblem(found, cwd, PATH);
    return problem && `${JSON.stringify(program)} (found on PATH as ${found}) ${problem}`;
  }
  // Present but not executable somewhere on PATH is worth saying: it is the likely mistake.
  const there = pathDirs(cwd, PATH).map((d) => path.join(d, program)).find((f) => statOf(f)?.isFile());
  if (there) return `${JSON.stringify(program)} found on PATH as ${there}, but it is not executable`;
  return `${JSON.stringify(program)} not found on PATH (${PATH}${childPATH === undefined ? ': PATH is not set, so the default' : ''})`;
}

/**
 * Why a program that is there (a path, or a name found on `PATH`) cannot be run, or null,
 * also when it is not there: spawn's ENOENT for a script whose #! interpreter (or a binary
 * whose ELF loader) was removed since the start's check, which alone read "command not found".
 */
export function whyProgramNotRun(program: string, cwd: string, childPATH: string | undefined): string | null {
  const PATH = childPATH ?? DEFAULT_PATH;
  const there = program.includes('/') ? statOf(path.resolve(cwd, program)) !== undefined : onPath(program, cwd, PATH) !== undefined;
  return there ? programProblem(program, cwd, childPATH) : null;
}

function fileProblem(file: string, cwd: string, PATH: string | undefined): string | null {
  return accessProblem(file) ?? formatProblem(file, cwd, PATH);
}

/** ELF e_machine of the architectures Node runs on (process.arch), for the format check. */
const ELF_MACHINE: Partial<Record<NodeJS.Architecture, number>> = { x64: 62, arm64: 183, arm: 40, ia32: 3, ppc64: 21, s390x: 22, riscv64: 243, loong64: 258 };

/**
 * A file the kernel cannot execute (execve's ENOEXEC) is not refused by spawn: execvp then
 * hands it to /bin/sh, a shell the handler never asked for, which fails on every item (a
 * binary for another architecture reads as a broken script) and charges them all. So a
 * program must start with `#!` or be an ELF binary for this machine. An unreadable file
 * (execute-only) is left to the kernel.
 */
function formatProblem(file: string, cwd: string, PATH: string | undefined): string | null {
  // Linux reads a #! line from the first 256 bytes (BINPRM_BUF_SIZE).
  const head = Buffer.alloc(256);
  let n: number;
  try {
    const fd = openSync(file, 'r');
    try {
      n = readSync(fd, head, 0, head.length, 0);
    } finally {
      closeSync(fd);
    }
  } catch {
    return null;
  }
  if (n >= 2 && head[0] === 0x23 && head[1] === 0x21) return interpreterProblem(head.toString('latin1', 2, n), cwd, PATH); // #!
  if (n >= 20 && head.readUInt32BE(0) === 0x7f454c46) {
    const machine = head[5] === 2 ? head.readUInt16BE(18) : head.readUInt16LE(18);
    const ours = ELF_MACHINE[process.arch];
    if (ours !== undefined && machine !== ours) return `is a binary for another architecture (ELF machine ${machine}; this machine is ${process.arch}): the kernel cannot execute it`;
    const loader = elfInterpreter(file, head.subarray(0, n));
    const problem = loader === undefined ? null : accessProblem(path.resolve(cwd, loader));
    return problem && `is a binary whose ELF interpreter (its dynamic loader) ${JSON.stringify(loader)} ${problem}: the kernel cannot execute it (built for another C library, such as musl on Alpine?)`;
  }
  return n === 0
    ? 'is empty: the kernel cannot execute it (it would be run by /bin/sh as an empty script)'
    : 'has no #! line and is not a binary this machine runs: the kernel cannot execute it (it would be run by /bin/sh; add a #! line)';
}

/**
 * The program interpreter an ELF file names (its PT_INTERP: the dynamic loader, such as
 * /lib64/ld-linux-x86-64.so.2), or undefined for a static binary or one that cannot be read.
 * When that file is missing execve fails with ENOENT, as for a missing program: an Alpine
 * (musl) binary in a glibc image, whose /lib/ld-musl-x86_64.so.1 is not there.
 */
function elfInterpreter(file: string, head: Buffer): string | undefined {
  const wide = head[4] === 2;
  const le = head[5] !== 2;
  if (head.length < (wide ? 64 : 52)) return undefined;
  const u16 = (b: Buffer, at: number): number => (le ? b.readUInt16LE(at) : b.readUInt16BE(at));
  const word = (b: Buffer, at: number): number => (wide ? Number(le ? b.readBigUInt64LE(at) : b.readBigUInt64BE(at)) : le ? b.readUInt32LE(at) : b.readUInt32BE(at));
  const phoff = word(head, wide ? 0x20 : 0x1c);
  const phentsize = u16(head, wide ? 0x36 : 0x2a);
  const phnum = u16(head, wide ? 0x38 : 0x2c);
  if (phnum === 0 || phentsize < (wide ? 56 : 32) || phnum * phentsize > 1 << 20) return undefined;
  try {
    const fd = openSync(file, 'r');
    try {
      const table = Buffer.alloc(phnum * phentsize);
      if (readSync(fd, table, 0, table.length, phoff) < table.length) return undefined;
      for (let i = 0; i < phnum; i++) {
        const at = i * phentsize;
        if ((le ? table.readUInt32LE(at) : table.readUInt32BE(at)) !== 3) continue; // PT_INTERP
        const offset = word(table, at + (wide ? 0x08 : 0x04));
        const size = word(table, at + (wide ? 0x20 : 0x10));
        if (size < 2 || size > 4096) return undefined;
        const name = Buffer.alloc(size);
        const got = readSync(fd, name, 0, size, offset);
        const end = name.indexOf(0);
        return name.toString('latin1', 0, end === -1 ? got : Math.min(end, got)) || undefined;
      }
      return undefined;
    } finally {
      closeSync(fd);
    }
  } catch {
    return undefined;
  }
}

/**
 * A #! line whose interpreter is missing makes execve fail with ENOENT on every item
 * (`#!/usr/bin/python` in an image with only python3), and `#!/usr/bin/env NAME` with
 * NAME not on the child's PATH exits 127 on every item, charging them all. As the kernel
 * reads the line: the interpreter runs to the first blank, the rest is one argument
 * (env's own options and program: envProblem).
 */
function interpreterProblem(line: string, cwd: string, PATH: string | undefined): string | null {
  const end = line.indexOf('\n');
  // No line end in the bytes read: a line that long is the kernel's business.
  if (end === -1) return null;
  // Only blanks are trimmed, as the kernel does: a CRLF script's "/bin/sh\r" does not exist,
  // nor does env's "python3\r" (`[^]`, not `.`, which would stop before the \r and drop it).
  const [interpreter = '', arg = ''] = line.slice(0, end).replace(/^[ \t]+|[ \t]+$/g, '').split(/[ \t]+([^]*)/);
  if (interpreter === '') return null;
  const problem = accessProblem(path.resolve(cwd, interpreter));
  if (problem) return `has a #! interpreter ${JSON.stringify(interpreter)} that ${problem}${crlf(interpreter)}`;
  // `#!/bin/bash -e\r`: the shells and Python take "-e\r" for an unknown option and exit 1 or 2
  // on every item, each charged until dead (perl and `env -S` shrug the \r off).
  if (arg.endsWith('\r') && CR_REFUSED.test(path.basename(interpreter))) {
    return `has a #! line whose argument ${JSON.stringify(arg)} ${path.basename(interpreter)} refuses as an unknown option${crlf(arg)}`;
  }
  if (path.basename(interpreter) !== 'env') return null;
  return envProblem(arg, cwd, PATH);
}

/** Interpreters that refuse an option ending in \r (`bash: -\r: invalid option`, `Unknown option: -\r`). */
const CR_REFUSED = /^((ba|da|z|k|mk)?sh|python[\d.]*)$/;

/** Programs that take a script file as their first argument that is not an option. */
const INTERPRETER = /^(python[\d.]*|pypy[\d.]*|node(js)?|bun|deno|ruby|perl[\d.]*|php[\d.]*|Rscript|lua[\d.]*|(ba|da|z|k|mk)?sh)$/;
/** Options after which an interpreter runs no script file: code or a module given inline, or stdin. */
const NO_SCRIPT = new Set(['-c', '-e', '-m', '-E', '-p', '-', '--eval', '--print', '--command']);
/**
 * The letters of those options that may come in a cluster of short ones (`sh -ec`, `bash -xc`,
 * `python3 -uc`, `perl -lne`), by interpreter: the code still follows. A shell's `-e` is errexit.
 */
const inlineLetters = (program: string): RegExp =>
  /sh$/.test(program) ? /^-[A-Za-z]*c[A-Za-z]*$/ : /^(python|pypy)/.test(program) ? /^-[A-Za-z]*[cm][A-Za-z]*$/ : /^-[A-Za-z]*[eEp][A-Za-z]*$/;

/**
 * Why the script an interpreter is given in handler.command cannot be run, or null: the
 * command's first argument after the interpreter that is not an option, when it names a
 * script file by a path (`python3 /app/qc.py {path}`) and that file is not there. Every
 * attempt would fail the same way (python3 exits 2, node 1), and each item be charged
 * until dead. Only a plain path with a script's extension is checked, as the program is
 * (relative to `cwd`): an option's value or inline code is not a file.
 */
export function scriptProblem(command: readonly string[], cwd: string): string | null {
  const [program = '', ...args] = command;
  const name = path.basename(program);
  if (!INTERPRETER.test(name)) return null;
  const cluster = inlineLetters(name);
  for (const arg of args) {
    if (NO_SCRIPT.has(arg) || cluster.test(arg) || PLACEHOLDER.test(arg)) return null;
    if (arg.startsWith('-') || !SCRIPT_NAME.test(arg)) continue;
    // A script named bare (not checked) or by a URL (`deno run https://...`): what follows are its arguments.
    if (!arg.includes('/') || /^[A-Za-z][\w+.-]*:\/\//.test(arg)) return null;
    const file = path.resolve(cwd, arg);
    const st = statOf(file);
    if (st?.isFile()) return null;
    const what = st === undefined ? 'does not exist' : 'is not a file';
    return `${JSON.stringify(program)} is given the script ${JSON.stringify(arg)}${file === arg ? '' : ` (${file})`}, which ${what}: every item would fail the same way`;
  }
  return null;
}
