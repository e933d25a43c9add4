import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, finished, runCli, workspace } from '../helpers/cli.js';

describe('handler.command must name a program that can run', () => {
  it('a program not on PATH: validate and run exit 78 naming handler.command, and no item is touched', async () => {
    const ws = workspace({ handler: { command: ['cronsafe-no-such-program', '{path}'] } }, { 'a.txt': 'a', 'b.txt': 'b' });
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', ws.configPath]);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain('handler.command');
      expect(r.stderr).toContain('"cronsafe-no-such-program" not found on PATH');
    }
    // Before: exit 0 and both items dead-lettered with ENOENT.
    expect(existsSync(ws.db)).toBe(false);
  });

  it('a path that is not executable, or that does not exist (relative to source.directory): exit 78', async () => {
    const ws = workspace({ handler: { command: ['./tools/qc.sh', '{path}'] } }, { 'a.txt': 'a', 'tools/qc.sh': '#!/bin/sh\nexit 0\n' });
    const r = await runCli(['validate', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toContain(`handler.command: cannot run the program: "./tools/qc.sh" (${path.join(ws.source, 'tools/qc.sh')}) is not executable`);
    chmodSync(path.join(ws.source, 'tools/qc.sh'), 0o755);
    expect((await runCli(['validate', '-c', ws.configPath])).code).toBe(0);

    const missing = workspace({ handler: { command: ['/opt/nowhere/qc', '{path}'] } }, { 'a.txt': 'a' });
    const m = await runCli(['run', '-c', missing.configPath]);
    expect(m.code).toBe(78);
    expect(m.stderr).toContain('"/opt/nowhere/qc" does not exist');
  });

  it("handler.env's PATH is the one searched, as the child's", async () => {
    const ws = workspace({ handler: { command: ['my-tool', '{path}'], env: { PATH: '' } } }, { 'a.txt': 'a' });
    const bin = path.join(ws.dir, 'bin');
    mkdirSync(bin);
    writeFileSync(path.join(bin, 'my-tool'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
    expect((await runCli(['validate', '-c', ws.configPath])).code).toBe(78);
    const ok = workspace({ handler: { command: ['my-tool', '{path}'], env: { PATH: `${bin}:/usr/bin:/bin` } } }, { 'a.txt': 'a' });
    const r = await runCli(['run', '-c', ok.configPath]);
    expect(r.code, r.stderr).toBe(0);
  });

  it('with no PATH at all, a bare name is looked up where the child looks (/usr/bin:/bin), not refused', async () => {
    // spawn (libuv) searches its default path when the environment has no PATH, as execvp does.
    const ws = workspace({ handler: { command: ['cat', '{path}'] }, log: { level: 'info' } }, { 'a.txt': 'a' });
    const noPath = { PATH: undefined };
    const v = await runCli(['validate', '-c', ws.configPath], { env: noPath });
    expect(v.code, v.stderr).toBe(0);
    const r = await runCli(['run', '-c', ws.configPath], { env: noPath });
    expect(r.code, r.stderr).toBe(0);
    expect(r.lines.find((l) => l.stream === 'stdout')?.msg).toBe('a');
    // And a name that is not there is still refused, naming the path searched.
    const missing = workspace({ handler: { command: ['cronsafe-no-such-program', '{path}'] } }, { 'a.txt': 'a' });
    const m = await runCli(['validate', '-c', missing.configPath], { env: noPath });
    expect(m.code).toBe(78);
    expect(m.stderr).toContain('"cronsafe-no-such-program" not found on PATH (/usr/bin:/bin: PATH is not set, so the default)');
  });

  it('a file the kernel cannot execute (another architecture, no #! line, empty) is refused with 78, not run by /bin/sh and charged on every item', async () => {
    const ws = workspace({ handler: { command: ['./tools/prog', '{path}'] } }, { 'a.txt': 'a', 'b.txt': 'b' });
    const prog = path.join(ws.source, 'tools/prog');
    mkdirSync(path.dirname(prog), { recursive: true });
    // This machine's own `true`, with its ELF machine field changed to another architecture's.
    copyFileSync('/bin/true', prog);
    const elf = readFileSync(prog);
    const other = elf.readUInt16LE(18) === 183 ? 62 : 183; // aarch64 <-> x86-64
    elf.writeUInt16LE(other, 18);
    writeFileSync(prog, elf, { mode: 0o755 });
    chmodSync(prog, 0o755);
    const cases: Array<[string, Buffer | string]> = [
      ['another architecture', elf],
      ['has no #! line', 'exit 0\n'],
      ['is empty', ''],
    ];
    for (const [why, content] of cases) {
      writeFileSync(prog, content);
      for (const cmd of ['validate', 'run']) {
        const r = await runCli([cmd, '-c', ws.configPath]);
        expect(r.code, `${why} / ${cmd}: ${r.stderr}`).toBe(78);
        expect(r.stderr).toContain('handler.command');
        expect(r.stderr).toContain(why);
      }
    }
    expect(existsSync(ws.db)).toBe(false);
    // The same file with a #! line runs.
    writeFileSync(prog, '#!/bin/sh\nexit 0\n');
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
  });

  it('on PATH, the first executable file is the one checked, as execvp takes it', async () => {
    const ws = workspace({ handler: { command: ['my-tool', '{path}'], env: { PATH: '' } } }, { 'a.txt': 'a' });
    const bin = path.join(ws.dir, 'bin');
    mkdirSync(bin);
    writeFileSync(path.join(bin, 'my-tool'), 'exit 0\n', { mode: 0o755 });
    const bad = workspace({ handler: { command: ['my-tool', '{path}'], env: { PATH: `${bin}:/usr/bin:/bin` } } }, { 'a.txt': 'a' });
    const r = await runCli(['validate', '-c', bad.configPath]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toContain(`"my-tool" (found on PATH as ${path.join(bin, 'my-tool')}) has no #! line`);
  });

  it("a script whose #! interpreter is missing (or env's program is not on PATH) is refused with 78, not claimed and failed on every run", async () => {
    const ws = workspace({ handler: { command: ['./qc', '{path}'] } }, { 'a.txt': 'a', 'b.txt': 'b' });
    const prog = path.join(ws.source, 'qc');
    const cases: Array<[string, string]> = [
      ['#!/usr/bin/python9 -u\nexit 0\n', '#! interpreter "/usr/bin/python9" that does not exist'],
      ['#!  /etc/passwd\nexit 0\n', '#! interpreter "/etc/passwd" that is not executable'],
      ['#!/bin/sh\r\nexit 0\r\n', '#! interpreter "/bin/sh\\r" that does not exist'],
      ['#!/usr/bin/env cronsafe-no-such-interpreter\nexit 0\n', '#! line for env whose program "cronsafe-no-such-interpreter" is not found on PATH'],
    ];
    for (const [script, why] of cases) {
      writeFileSync(prog, script, { mode: 0o755 });
      for (const cmd of ['validate', 'run']) {
        const r = await runCli([cmd, '-c', ws.configPath]);
        expect(r.code, `${script} / ${cmd}: ${r.stderr}`).toBe(78);
        expect(r.stderr).toContain(`handler.command: cannot run the program: "./qc" (${prog}) has a ${why}`);
      }
    }
    // Before: exit 1 after claiming every item, on every run.
    expect(existsSync(ws.db)).toBe(false);
    for (const ok of ['#!/bin/sh\nexit 0\n', '#! /bin/sh -e\nexit 0\n', '#!/usr/bin/env sh\nexit 0\n']) {
      writeFileSync(prog, ok);
      const r = await runCli(['run', '-c', ws.configPath]);
      expect(r.code, `${ok}: ${r.stderr}`).toBe(0);
    }
  });

  it('a #!/usr/bin/env line with Windows line ends (env\'s program "sh\\r"), or naming no program, is refused with 78, not claimed and failed on every run', async () => {
    const ws = workspace({ handler: { command: ['./qc', '{path}'] } }, { 'a.txt': 'a', 'b.txt': 'b' });
    const prog = path.join(ws.source, 'qc');
    const cases: Array<[string, string]> = [
      ['#!/usr/bin/env sh\r\nexit 0\r\n', '#! line for env whose program "sh\\r" is not found on PATH'],
      ['#!/usr/bin/env\nexit 0\n', '#! line for env that names no program'],
      ['#!/usr/bin/env -i\r\nexit 0\r\n', '#! line for env ("-i\\r") that env refuses: invalid option "-\\r"'],
      // Not env, but as sure to fail: exit 2 on every item, each charged until dead.
      ['#!/bin/sh -e\r\nexit 0\r\n', '#! line whose argument "-e\\r" sh refuses as an unknown option'],
    ];
    for (const [script, why] of cases) {
      writeFileSync(prog, script, { mode: 0o755 });
      for (const cmd of ['validate', 'run']) {
        const r = await runCli([cmd, '-c', ws.configPath]);
        expect(r.code, `${JSON.stringify(script)} / ${cmd}: ${r.stderr}`).toBe(78);
        expect(r.stderr).toContain(`handler.command: cannot run the program: "./qc" (${prog}) has a ${why}`);
        expect(r.stderr.includes('the script has Windows (CRLF) line ends')).toBe(script.includes('\r'));
      }
    }
    // Before: validate said OK; each run claimed the items and exited 1 (env: 'sh\r': No such
    // file or directory, exit 127), the bare env ran itself until each attempt timed out, and
    // sh's "Illegal option -\r" charged every item until it was dead.
    expect(existsSync(ws.db)).toBe(false);
  });

  it('a #!/usr/bin/env line whose env options leave no program (-i, -S, -S -i, FOO=1 python3), or name one not on the PATH env searches, is refused with 78, not run until the timeout on every item', async () => {
    // timeoutSeconds 2 and retry.maxAttempts 1: before the fix, a run ends (items dead) rather than hanging the test.
    const ws = workspace({ handler: { command: ['./qc', '{path}'], timeoutSeconds: 2 }, retry: { maxAttempts: 1 } }, { 'a.txt': 'a', 'b.txt': 'b' });
    const prog = path.join(ws.source, 'qc');
    const loops = '#! line for env that names no program';
    const cases: Array<[string, string]> = [
      ['#!/usr/bin/env -i\nexit 0\n', `${loops} ("-i" holds only env's options or NAME=VALUE settings): env would run the script itself, again and again`],
      ['#!/usr/bin/env --ignore-environment\nexit 0\n', loops],
      ['#!/usr/bin/env -S\nexit 0\n', loops],
      ['#!/usr/bin/env -S -i\nexit 0\n', loops],
      ['#!/usr/bin/env -S -i VAR=1 # no program\nexit 0\n', loops],
      ['#!/usr/bin/env -\nexit 0\n', loops],
      // One argument to env, blanks and all: a setting of FOO to "1 sh", then no program.
      ['#!/usr/bin/env FOO=1 sh\nexit 0\n', `${loops} ("FOO=1 sh" holds only env's options or NAME=VALUE settings): env would run the script itself, again and again, until the timeout (the kernel gives env the rest of the #! line as one argument`],
      ['#!/usr/bin/env -i sh\nexit 0\n', '#! line for env ("-i sh") that env refuses: invalid option "- "'],
      ['#!/usr/bin/env -S cronsafe-no-such-interpreter -u\nexit 0\n', '#! line for env whose program "cronsafe-no-such-interpreter" is not found on PATH'],
      ['#!/usr/bin/env -S -C /nonexistent-dir sh\nexit 0\n', 'whose -C directory "/nonexistent-dir" (/nonexistent-dir) is not a directory'],
      ['#!/usr/bin/env -u\nexit 0\n', "whose option -u takes the script's own path as its value"],
    ];
    for (const [script, why] of cases) {
      writeFileSync(prog, script, { mode: 0o755 });
      for (const cmd of ['validate', 'run']) {
        const r = await runCli([cmd, '-c', ws.configPath], { timeoutMs: 30_000 });
        expect(r.code, `${JSON.stringify(script)} / ${cmd}: ${r.stderr}`).toBe(78);
        expect(r.stderr).toContain(`handler.command: cannot run the program: "./qc" (${prog}) has a `);
        expect(r.stderr).toContain(why);
      }
    }
    // Before: validate said OK; each run claimed the items and ran the script until each attempt
    // timed out (env -i running it again, execve after execve), charging every item.
    expect(existsSync(ws.db)).toBe(false);
    // env with -i and -S as they work: the program found on execvp's default PATH, or a PATH env sets.
    const bin = path.join(ws.dir, 'bin');
    mkdirSync(bin);
    writeFileSync(path.join(bin, 'my-interp'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
    for (const ok of ['#!/usr/bin/env -S sh -e\nexit 0\n', '#!/usr/bin/env -iS sh\nexit 0\n', '#!/usr/bin/env -S\tsh # a comment\nexit 0\n', `#!/usr/bin/env -S -i PATH=${bin} my-interp\nexit 0\n`]) {
      const fresh = workspace({ handler: { command: ['./qc', '{path}'], timeoutSeconds: 2 } }, { 'a.txt': 'a', 'b.txt': 'b', qc: ok });
      chmodSync(path.join(fresh.source, 'qc'), 0o755);
      const r = await runCli(['run', '-c', fresh.configPath], { timeoutMs: 30_000 });
      expect(r.code, `${JSON.stringify(ok)}: ${r.stderr}`).toBe(0);
      expect(finished(r)?.counts, JSON.stringify(ok)).toMatchObject({ succeeded: 2, failed: 0, deadLettered: 0 });
    }
    // 26 runs one after the other: past 60 s with 4 test workers at a load of 30.
  }, 180_000);

  it('an ELF binary whose interpreter (dynamic loader) is missing, as a musl build in a glibc image, is refused with 78, not claimed and failed on every run', async () => {
    const ws = workspace({ handler: { command: ['./qc', '{path}'] } }, { 'a.txt': 'a', 'b.txt': 'b' });
    const prog = path.join(ws.source, 'qc');
    // /bin/true naming a loader that is not there: its PT_INTERP string, overwritten in place.
    const elf = readFileSync('/bin/true');
    const at = elf.indexOf('/ld-');
    const start = elf.lastIndexOf(0, at) + 1;
    const end = elf.indexOf(0, at);
    const loader = '/nowhere/ld.so';
    expect(end - start).toBeGreaterThan(loader.length);
    elf.fill(0, start, end);
    elf.write(loader, start, 'latin1');
    writeFileSync(prog, elf, { mode: 0o755 });
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', ws.configPath]);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(`handler.command: cannot run the program: "./qc" (${prog}) is a binary whose ELF interpreter (its dynamic loader) "${loader}" does not exist`);
    }
    // Before: validate said OK; each run claimed the items and exited 1 with spawn's ENOENT
    // ("command not found", of a program that is there), counted toward backoffLimit.
    expect(existsSync(ws.db)).toBe(false);
    // The real one, whose loader is there, runs.
    copyFileSync('/bin/true', prog);
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
  });

  it("an interpreter's script that does not exist is refused with 78, not charged to every item; inline code, options' values and a script that is there are not", async () => {
    const node = process.execPath;
    const ws = workspace({ handler: { command: [node, '--no-warnings', '/opt/nowhere/qc.mjs', '{path}'] } }, { 'a.txt': 'a', 'tools/qc.mjs': 'process.exit(0)\n' });
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', ws.configPath]);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(`handler.command: cannot run the script: ${JSON.stringify(node)} is given the script "/opt/nowhere/qc.mjs", which does not exist`);
    }
    // Before: validate said OK and each run charged every item until it was dead.
    expect(existsSync(ws.db)).toBe(false);
    const fine: string[][] = [
      [node, './tools/qc.mjs', '{path}'], // there (relative to source.directory)
      [node, '-e', 'process.exit(0)', '/opt/nowhere/x.js'], // inline code: the rest are its arguments
      [node, '--import', 'data:text/javascript,', './tools/qc.mjs'], // an option's value is no script
      ['/bin/sh', '-c', 'exit 0', 'sh', '{path}'],
      ['/bin/true', '/opt/nowhere/qc.py'], // not an interpreter: an argument like any other
    ];
    for (const command of fine) {
      configure(ws, { handler: { command } });
      const r = await runCli(['validate', '-c', ws.configPath]);
      expect(r.code, `${JSON.stringify(command)}: ${r.stderr}`).toBe(0);
    }
  });
  it("inline code given after a cluster of short options (sh -ec, bash -xc, python3 -uc) is not taken for a script", async () => {
    const ws = workspace({ handler: { command: ['/bin/true'] } }, { 'a.txt': 'a' });
    const fine: string[][] = [
      ['/bin/sh', '-ec', 'exec /bin/sh /opt/nowhere/qc.sh'], // Kubernetes' usual form: -e and -c in one
      ['/bin/sh', '-xc', 'cd /tmp && ./nowhere/qc.py'],
      ['/bin/sh', '-ce', 'exit 0; /opt/nowhere/x.sh'],
      [process.execPath, '-pe', '"/opt/nowhere/x.js"'],
    ];
    for (const command of fine) {
      configure(ws, { handler: { command } });
      const r = await runCli(['validate', '-c', ws.configPath]);
      // Before: exit 78, 'is given the script "exec /bin/sh /opt/nowhere/qc.sh" ..., which does not exist'.
      expect(r.code, `${JSON.stringify(command)}: ${r.stderr}`).toBe(0);
    }
    configure(ws, { handler: { command: ['/bin/sh', '-ec', 'exit 0'] } });
    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);
    // A cluster of flags that take no code (a shell's -e is errexit) still leaves the script checked.
    configure(ws, { handler: { command: ['/bin/sh', '-eux', '/opt/nowhere/qc.sh'] } });
    const r = await runCli(['validate', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toContain('"/opt/nowhere/qc.sh", which does not exist');
  });
  it("only the interpreter's script is checked: not its arguments after a script named bare, nor after a URL", async () => {
    const ws = workspace({ handler: { command: ['/bin/true'] } }, { 'a.txt': 'a', 'qc.mjs': 'process.exit(0)\n', 'bin/deno': '#!/bin/sh\nexit 0\n' });
    chmodSync(path.join(ws.source, 'bin/deno'), 0o755);
    const fine: string[][] = [
      [process.execPath, 'qc.mjs', '/opt/nowhere/report.js', '{path}'], // the script is qc.mjs; the rest are its arguments
      ['/bin/sh', 'run.sh', '/opt/nowhere/generated.sh'],
      ['deno', 'run', '--allow-read', 'https://example.com/tools/qc.ts', '{path}'], // a remote script is no file
    ];
    for (const command of fine) {
      configure(ws, { handler: { command, env: { PATH: `${path.join(ws.source, 'bin')}:/usr/bin:/bin` } } });
      const r = await runCli(['validate', '-c', ws.configPath]);
      // Before: exit 78, 'is given the script "/opt/nowhere/report.js" ..., which does not exist'.
      expect(r.code, `${JSON.stringify(command)}: ${r.stderr}`).toBe(0);
    }
  });
});

