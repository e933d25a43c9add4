import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, configFile, runCli, spawnCliRaw, workspace } from '../helpers/cli.js';

/** configFile(edit(valid)) beside `loop`, a link to `loop2`, which links back. */
function loopConfig(edit: (v: string) => string): string {
  const file = configFile(edit(valid));
  symlinkSync('loop2', path.join(path.dirname(file), 'loop'));
  symlinkSync('loop', path.join(path.dirname(file), 'loop2'));
  return file;
}

const valid = `name: caption-qc
source: {directory: ./source}
handler: {command: ["true"]}
`;

// Each case spawns the CLI on a config of its own and shares nothing with the others, so
// they run side by side (vitest's maxConcurrency, 5 at a time): the file takes about as long
// as its longest case (the 60 s import floor) rather than the sum of 50 spawns after it.
describe.concurrent('bad config: exit 78 with a message naming the problem', () => {
  it.each([
    ['missing file', () => path.join(tmpdir(), 'does-not-exist', 'cronsafe.yaml'), /config file not found: .*does-not-exist/],
    ['bad YAML', () => configFile('name: x\nsource: {directory: ./source\n'), /cronsafe\.yaml:\d+:\d+: invalid YAML/],
    ['unknown key', () => configFile(`${valid}concurency: 4\n`), /concurency: unknown key/],
    ['unknown nested key', () => configFile(`${valid}retry: {maxAttempt: 3}\n`), /retry\.maxAttempt: unknown key/],
    ['wrong type', () => configFile(`${valid}concurrency: eight\n`), /concurrency:/],
    ['missing source directory', () => configFile(valid.replace('./source', './nowhere')), /source\.directory.*nowhere/],
    ['source is a file', () => configFile(valid.replace('./source', './cronsafe.yaml')), /source\.directory/],
    ['state.sqlite is a directory', () => configFile(`${valid}state: {sqlite: ./source}\n`), /cronsafe\.yaml: state\.sqlite: a directory, expected the ledger file .*source/],
    // A device or a FIFO: the hint named a file below it (`/dev/null/caption-qc.db`), which can never be.
    ['state.sqlite is /dev/null', () => configFile(`${valid}state: {sqlite: /dev/null}\n`), /cronsafe\.yaml: state\.sqlite: a character device, not the ledger \(a regular file\): name a file \(e\.g\. \/dev\/caption-qc\.db\): \/dev\/null\n/],
    ['config is /dev/zero (read no more than 1 MiB)', () => '/dev/zero', /config file \/dev\/zero is larger than the 1 MiB limit/],
    // A path through a regular file (a file mounted where a directory was meant) or a loop of
    // links can never work: 78 naming the key, not `fatal:` and a stack trace (exit 1) every run.
    ['source.directory below a regular file', () => configFile(valid.replace('./source', './cronsafe.yaml/source')), /cronsafe\.yaml: source\.directory: .*not a directory.*cronsafe\.yaml\/source/],
    ['output.directory below a regular file', () => configFile(`${valid}output: {directory: ./cronsafe.yaml/out}\n`), /cronsafe\.yaml: output\.directory: .*not a directory.*cronsafe\.yaml\/out/],
    ['handler.module below a regular file', () => configFile(valid.replace('command: ["true"]', 'module: ./cronsafe.yaml/h.mjs')), /cronsafe\.yaml: handler\.module: .*not a directory.*cronsafe\.yaml\/h\.mjs/],
    ['lock.path below a regular file', () => configFile(`${valid}lock: {path: ./cronsafe.yaml/x.lock}\n`), /cronsafe\.yaml: lock\.path: .*cronsafe\.yaml\/x\.lock cannot be created: a parent of the lock file is not a directory/],
    ['source.directory behind a loop of links', () => loopConfig((v) => v.replace('./source', './loop/source')), /cronsafe\.yaml: source\.directory: .*loop of symbolic links/],
    ['output.directory behind a loop of links', () => loopConfig((v) => `${v}output: {directory: ./loop/out}\n`), /cronsafe\.yaml: output\.directory: .*loop of symbolic links/],
    // No file name can hold a NUL byte, nor can argv or the environment: Node refuses them at
    // the first use (`fatal: TypeError`, or every item's spawn failing, exit 1 every run).
    ['a NUL byte in source.directory', () => configFile(valid.replace('./source', '"./source\\0x"')), /cronsafe\.yaml: source\.directory: .*NUL/],
    ['a NUL byte in state.sqlite', () => configFile(`${valid}state: {sqlite: "./s\\0.db"}\n`), /cronsafe\.yaml: state\.sqlite: .*NUL/],
    ['a NUL byte in lock.path', () => configFile(`${valid}lock: {path: "./l\\0.lock"}\n`), /cronsafe\.yaml: lock\.path: .*NUL/],
    ['a NUL byte in a handler.command argument', () => configFile(valid.replace('command: ["true"]', 'command: ["true", "a\\0b"]')), /cronsafe\.yaml: handler\.command\[1\]: expected no NUL byte/],
    // A path the kernel refuses (ENAMETOOLONG): every run exited 1 (after making the ledger
    // file, when only the names kept beside it were too long), and validate crashed with
    // `fatal:` and a stack trace on the start journal's lstat.
    ['state.sqlite with a name over 255 bytes', () => configFile(`${valid}state: {sqlite: ./${'s'.repeat(256)}}\n`), /cronsafe\.yaml: state\.sqlite: the path is too long for the file system .*ENAMETOOLONG/],
    ['state.sqlite whose name leaves no room for the -journal beside it', () => configFile(`${valid}state: {sqlite: ./${'s'.repeat(248)}}\n`), new RegExp(`cronsafe\\.yaml: state\\.sqlite: the path of .*/${'s'.repeat(248)}-journal, which is kept beside the ledger, is too long for the file system`)],
    ['lock.path with a name over 255 bytes', () => configFile(`${valid}lock: {path: ./${'l'.repeat(256)}}\n`), /cronsafe\.yaml: lock\.path: .*l{200}.* is too long for the file system .*ENAMETOOLONG/],
    // An alias inside the node it names is a cycle: every walk of the config recursed until
    // the stack overflowed (exit 1, `fatal: RangeError` and a stack trace).
    ['an alias inside its own anchor (a cycle)', () => configFile(`${valid}retry: &r {maxAttempts: 3, again: *r}\n`), /cronsafe\.yaml:4:\d+: retry\.again: invalid YAML: the alias \*r is inside the node it names/],
    // The YAML library resolved each alias by walking the whole file (and each anchor and
    // alias before it): 20,000 `*a` (60 KB) took minutes of CPU, 200,000 hours, in validate
    // and at every start of run.
    ['20,000 aliases', () => configFile(`${valid}x: &a 1\ny: [${Array(20_000).fill('*a').join(', ')}]\n`), /cronsafe\.yaml:5:\d+: invalid YAML: more than 1000 aliases \(\*name\)/],
    ['a NUL byte in a handler.env value', () => configFile(valid.replace('command: ["true"]', 'command: ["true"], env: {A: "a\\0b"}')), /cronsafe\.yaml: handler\.env\.A: .*NUL/],
    // Ids have no empty and no "." segment: such an exclude excluded nothing, silently (run exit 0, the files processed).
    ['an exclude with an empty segment (a//b)', () => configFile(valid.replace('{directory: ./source}', '{directory: ./source, exclude: ["logs//old/**"]}')), /cronsafe\.yaml: source\.exclude\[0\]: expected a glob that can match an item: an empty segment/],
    // The drain's last resort exited at the grace period itself, with the kubelet's SIGKILL (137).
    ['drain.marginSeconds 0', () => configFile(`${valid}drain: {marginSeconds: 0}\n`), /cronsafe\.yaml: drain\.marginSeconds: must be at least 1 \(seconds\), got 0: .*SIGKILL/],
    ['an include with a "." segment (a/./b)', () => configFile(valid.replace('{directory: ./source}', '{directory: ./source, include: ["in/./*.csv"]}')), /cronsafe\.yaml: source\.include\[0\]: expected a glob that can match an item: .* a "\." segment/],
  ])('%s', async (_name, make, pattern) => {
    const file = make();
    for (const cmd of [['run'], ['validate']]) {
      const r = await runCli([...cmd, '-c', file]);
      expect(r.code, `${cmd[0]}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toMatch(pattern);
    }
  });

  it('unreadable source directory (as an unprivileged user)', async () => {
    if (process.getuid?.() !== 0) {
      // Without root we cannot switch user; an unreadable dir of our own still fails access().
      const file = configFile(valid);
      chmodSync(path.join(path.dirname(file), 'source'), 0o000);
      const r = await runCli(['validate', '-c', file]);
      expect(r.code).toBe(78);
      expect(r.stderr).toMatch(/source\.directory/);
      return;
    }
    // Root reads everything, so run the CLI as nobody against a directory only root may read.
    const file = configFile(valid);
    const dir = path.dirname(file);
    chmodSync(dir, 0o755);
    chmodSync(path.join(dir, 'source'), 0o700);
    const child = spawn(process.execPath, [CLI, 'validate', '-c', file], { uid: 65534, gid: 65534, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
    const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    expect(code, err).toBe(78);
    expect(err).toMatch(/source\.directory.*(not readable|permission|EACCES)/i);
  });

  // validate says so too: a config it passes must not fail the Job's run with 78.
  it.each(['run', 'validate'])('a module handler that cannot be used: `%s` exits 78 with one `<file>: handler.module: <problem>` line', async (cmd) => {
    const file = configFile(valid.replace('command: ["true"]', 'module: ./handler.mjs'));
    const mod = path.join(path.dirname(file), 'handler.mjs');
    writeFileSync(mod, 'export const handle = async () => {};\n');
    const r = await runCli([cmd, '-c', file]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toBe(`cronsafe: config error: ${file}: handler.module: ${mod}: default export must be a function (item, ctx) => Promise<void>, found no default export\n`);
  });

  // typeof says 'function' for both, but calling a class throws (every item charged to the
  // dead letters), and calling a generator function runs none of its body: each item was
  // recorded done, its handler never run.
  it.each([
    ['an async generator function', 'export default async function* (item) { writeFileSync(`${item.path}.ran`, ""); yield; }', /an async generator function/],
    ['a class', 'export default class Handler { async run(item) { writeFileSync(`${item.path}.ran`, ""); } }', /a class \(Handler\)/],
  ])('a default export that is %s: run and validate exit 78 naming handler.module; no item is done', async (_, code, pattern) => {
    const file = configFile(valid.replace('command: ["true"]', 'module: ./handler.mjs'));
    const dir = path.dirname(file);
    writeFileSync(path.join(dir, 'source', 'a.txt'), 'a');
    const mod = path.join(dir, 'handler.mjs');
    writeFileSync(mod, `import { writeFileSync } from 'node:fs';\n${code}\n`);
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', file]);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(`${file}: handler.module: ${mod}: default export must be a function`);
      expect(r.stderr).toMatch(pattern);
    }
    const status = await runCli(['status', '--json', '-c', file]);
    expect(JSON.parse(status.stdout).items).toMatchObject({ done: 0, dead: 0 });
  });

  it('validate imports a module handler that cannot be imported: 78 naming handler.module', async () => {
    const file = configFile(valid.replace('command: ["true"]', 'module: ./handler.mjs'));
    const mod = path.join(path.dirname(file), 'handler.mjs');
    writeFileSync(mod, 'export default async function (item, ctx) {\n');
    const r = await runCli(['validate', '-c', file]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toContain(`${file}: handler.module: ${mod}: cannot import: `);
  });

  it("a module handler's syntax error is 78 saying its line: Node's error for an ES module names none", async () => {
    const file = configFile(valid.replace('command: ["true"]', 'module: ./handler.mjs'));
    const mod = path.join(path.dirname(file), 'handler.mjs');
    writeFileSync(mod, 'const a = 1;\n\nexport default async () => {\n  if (a) {\n    return;\n  }}\n}\n');
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', file]);
      expect(r.code, r.stderr).toBe(78);
      // Before: "cannot import: Unexpected token '}'" and no more.
      expect(r.stderr).toContain(`${file}: handler.module: ${mod}: cannot import: Unexpected token '}' (line 7)`);
    }
  });

  it("a module handler whose top-level code leaves a promise rejection unhandled is 78 for validate and run, as a throw there is", async () => {
    const file = configFile(valid.replace('command: ["true"]', 'module: ./handler.mjs'));
    const mod = path.join(path.dirname(file), 'handler.mjs');
    writeFileSync(mod, 'Promise.reject(new Error("stray at import"));\nexport default async () => {};\n');
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', file]);
      // Before: validate crashed with Node's stack (exit 1); run started, then failed (exit 1) on every run.
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(`${file}: handler.module: ${mod}: cannot import: its top-level code left a promise rejection unhandled: stray at import`);
      expect(r.stderr).not.toContain('Node.js v');
    }
  });

  it('a module handler whose top-level await can never settle is 78 naming handler.module, not a silent exit 13', async () => {
    const file = configFile(valid.replace('command: ["true"]', 'module: ./handler.mjs'));
    const mod = path.join(path.dirname(file), 'handler.mjs');
    writeFileSync(mod, 'await new Promise(() => {});\nexport default async () => {};\n');
    const r = await runCli(['run', '-c', file]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toContain(`${file}: handler.module: ${mod}: cannot import: its top-level await never settles`);
  });

  it("a module handler whose top-level await waits on something alive that never answers is 78 for validate and run within handler.timeoutSeconds (at least 60 s), not a hang", async () => {
    const file = configFile(valid.replace('command: ["true"]', 'module: ./handler.mjs, timeoutSeconds: 1'));
    const mod = path.join(path.dirname(file), 'handler.mjs');
    // A client's heartbeat timer keeps the process alive; the connect it awaits never answers.
    writeFileSync(mod, 'setInterval(() => {}, 1000);\nawait new Promise(() => {});\nexport default async () => {};\n');
    // Both at once: each waits out the 60 s floor. The spawn's hard timeout ends a hang as a failure.
    const results = await Promise.all(['validate', 'run'].map(async (cmd) => [cmd, await runCli([cmd, '-c', file], { timeoutMs: 150_000 })] as const));
    for (const [cmd, r] of results) {
      // Before: validate never ended; run sat until the pod's activeDeadlineSeconds (here, the hard timeout's SIGKILL).
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(`${file}: handler.module: ${mod}: cannot import: its top-level code did not finish within 60 s (handler.timeoutSeconds, at least 60 s)`);
    }
  }, 200_000);

  it('cronsafe daemon refuses a schedule.cron that never fires as it reads it (vixie: "*/2" in day of week does not add days)', async () => {
    const file = configFile(`${valid}schedule: {cron: "0 0 30 2 */2", timeZone: UTC}\n`);
    const r = await runCli(['daemon', '-c', file], { timeoutMs: 20_000 });
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toMatch(/schedule\.cron: cron expression "0 0 30 2 \*\/2": never fires/);
  });

  // ICU takes Java's old three-letter IDs: BST is Asia/Dhaka to it, IST Asia/Kolkata, CST
  // America/Chicago, NST Pacific/Auckland. No IANA name, refused by Kubernetes (Go's
  // time.LoadLocation); `cronsafe daemon` fired in Dhaka's time for a config meaning London's.
  it.each([['BST', 'Asia/Dhaka'], ['IST', 'Asia/Kolkata'], ['CST', 'America/Chicago']])('schedule.timeZone %s (ICU: %s, no IANA name) is refused by daemon, schedule and validate (78 naming the key)', async (zone) => {
    const file = configFile(`${valid}schedule: {cron: "30 1 * * *", timeZone: ${zone}}\n`);
    for (const args of [['daemon'], ['schedule', '--json'], ['validate']]) {
      const r = await runCli([...args, '-c', file], { timeoutMs: 20_000 });
      expect(r.code, `${args[0]}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain(`schedule.timeZone: unknown time zone "${zone}": not an IANA zone name`);
    }
  });

  it('cronsafe schedule --daemon refuses that schedule.cron as the daemon does (it showed no latest and no next, exit 0)', async () => {
    const file = configFile(`${valid}schedule: {cron: "0 0 30 2 */2", timeZone: UTC}\n`);
    for (const json of [[], ['--json']]) {
      const r = await runCli(['schedule', '--daemon', ...json, '-c', file], { timeoutMs: 20_000 });
      expect(r.code, r.stdout).toBe(78);
      expect(r.stderr).toMatch(/schedule\.cron: cron expression "0 0 30 2 \*\/2": never fires .*\(as cronsafe daemon reads it/);
      expect(r.stdout).toBe('');
    }
    // Kubernetes reads `*/2` as a restriction (OR): under a CronJob it fires, and says so.
    const k8s = await runCli(['schedule', '--json', '-c', file], { timeoutMs: 20_000 });
    expect(k8s.code, k8s.stderr).toBe(0);
    expect(JSON.parse(k8s.stdout)).toMatchObject({ policy: 'kubernetes', next: expect.any(String) });
  });

  // The parse keeps ~1.5 KB per YAML token: 1 MiB of `[1,1,1,...` took 540 MB and 40 s, so a
  // pod under the chart's 512Mi limit was OOM-killed (137, counted toward backoffLimit).
  it('a 1 MiB config of 500,000 list items is 78 at once, within a 96 MiB heap', async () => {
    const file = configFile(`${valid}y: [${Array(520_000).fill('1').join(',')}]\n`);
    for (const cmd of ['run', 'validate']) {
      const r = await runCli([cmd, '-c', file], { env: { NODE_OPTIONS: '--max-old-space-size=96' } });
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toMatch(/cronsafe\.yaml: invalid YAML: more than 200000 YAML tokens/);
    }
  });

  // A key or value pasted from a web page or chat with a zero-width space, or a second BOM from
  // two files joined: the error read `concurrency: unknown key (did you mean "concurrency"?)`
  // and `log.level: expected one of ..., "info", ..., got "info"`, the culprit invisible.
  it('a key or value holding a character a terminal does not show is shown with it escaped', async () => {
    const file = configFile(`${valid}concurrency\u200b: 4\nlog: {level: "info\ufeff"}\n`);
    const r = await runCli(['validate', '-c', file]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toContain('log.level: expected one of "fatal", "error", "warn", "info", "debug", "trace", "silent", got "info\\ufeff"\n');
    expect(r.stderr).toContain('concurrency\\u200b: unknown key (did you mean "concurrency"?)\n');
    expect(r.stderr).not.toMatch(/[\u200b\ufeff]/);
  });

  it('a bad command line exits 2', async () => {
    expect((await runCli(['frobnicate'])).code).toBe(2);
    expect((await runCli(['run', '--no-such-flag'])).code).toBe(2);
  });

  // docs/configuration.md: "all problems are reported at once". A problem with state.sqlite or
  // lock.path was reported alone, hiding a missing source and a missing program: fixed one,
  // the next run (or validate) found the next.
  it('a problem with state.sqlite or lock.path is reported with the other paths\' problems, by validate and run alike', async () => {
    const file = configFile('name: all-at-once\nsource: {directory: ./nowhere}\nhandler: {command: ["no-such-program-xyz"]}\nstate: {sqlite: ./source}\nlock: {path: ./source}\n');
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', file]);
      expect(r.code, r.stderr).toBe(78);
      const lines = r.stderr.trimEnd().split('\n');
      expect(lines.map((l) => /cronsafe\.yaml: ([\w.]+):/.exec(l)?.[1]), r.stderr).toEqual(['state.sqlite', 'lock.path', 'source.directory', 'handler.command']);
    }
  });

  it('validate accepts a good config and prints its summary', async () => {
    const ws = workspace({ handler: { command: ['true'] } });
    const r = await runCli(['validate', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(': OK');
    expect(r.stdout).toContain('"name": "test-job"');
  });

  it("a config read from a pipe (-c /dev/stdin, -c <(...)) resolves its relative paths and the default ledger against the working directory, not /dev; one redirected from a file, against that file's directory", async () => {
    const name = `stdin-${process.pid}-${Date.now()}`;
    const text = `name: ${name}\nsource: {directory: ./source}\nhandler: {command: ["true"]}\n`;
    const cwd = path.dirname(configFile(''));
    writeFileSync(path.join(cwd, 'source', 'a.txt'), 'a');
    const piped = spawnCliRaw('sh', ['-c', 'printf %s "$1" | exec "$0" "$2" run -c /dev/stdin', process.execPath, text, CLI], { cwd });
    const p = await piped.exited;
    // Before: "source.directory: directory not found: /dev/source" (exit 78); with an absolute
    // source, the ledger went to /dev/.cronsafe on a tmpfs, lost at every restart.
    expect(p.code, piped.stderr()).toBe(0);
    expect(existsSync(path.join(cwd, '.cronsafe', `${name}.db`))).toBe(true);
    expect(existsSync(`/dev/.cronsafe/${name}.db`)).toBe(false);

    const file = configFile(text);
    writeFileSync(path.join(path.dirname(file), 'source', 'b.txt'), 'b');
    const redirected = spawnCliRaw('sh', ['-c', 'exec "$0" "$2" run -c /dev/stdin < "$1"', process.execPath, file, CLI], { cwd });
    const r = await redirected.exited;
    expect(r.code, redirected.stderr()).toBe(0);
    expect(existsSync(path.join(path.dirname(file), '.cronsafe', `${name}.db`))).toBe(true);
  });

  // /dev/shm is a tmpfs where people keep files: a config there was taken for a descriptor
  // (/dev/stdin), and its relative paths and default ledger went to the working directory.
  it.skipIf(!existsSync('/dev/shm'))('a config file kept under /dev (/dev/shm/job.yaml) resolves its relative paths against its own directory', async () => {
    const dir = mkdtempSync('/dev/shm/cronsafe-config-');
    try {
      mkdirSync(path.join(dir, 'queue'));
      writeFileSync(path.join(dir, 'queue', 'a.txt'), 'a');
      writeFileSync(path.join(dir, 'job.yaml'), 'name: shm-job\nsource: {directory: queue}\nhandler: {command: ["true"]}\n');
      const cwd = path.dirname(configFile(''));
      const r = spawnCliRaw(process.execPath, [CLI, 'run', '-c', path.join(dir, 'job.yaml')], { cwd });
      const { code } = await r.exited;
      expect(code, r.stderr()).toBe(0);
      expect(existsSync(path.join(dir, '.cronsafe', 'shm-job.db'))).toBe(true);
      expect(existsSync(path.join(cwd, '.cronsafe', 'shm-job.db'))).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the config path falls back to $CRONSAFE_CONFIG', async () => {
    const ws = workspace({ handler: { command: ['true'] } });
    const r = await runCli(['validate'], { env: { CRONSAFE_CONFIG: ws.configPath } });
    expect(r.code, r.stderr).toBe(0);
  });
});
