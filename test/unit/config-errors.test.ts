import { spawn, spawnSync } from 'node:child_process';
import { symlinkSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig, MAX_CONFIG_BYTES } from '../../src/config/load.js';
import { configError, expectProblem, useConfigDir } from '../helpers/config-files.js';

const dir = useConfigDir();
const { write, minimal } = dir;

describe('loadConfig: file and YAML errors', () => {
  // Each key said "Nested mappings are not allowed in compact mappings" at line 1, nothing of why.
  it('a file whose lines end in CR alone says so, in one line', () => {
    const file = write(`name: job\rsource:\r  directory: ${dir.queue}\rhandler:\r  command: [echo, "{path}"]\r`);
    expect(configError(() => loadConfig(file)).message).toBe(
      `${file}: invalid YAML: its lines end in a carriage return alone (CR, as classic Mac OS wrote them), which YAML does not read as a line end, so the whole file is one line: save it with LF (or CRLF) line ends`,
    );
    // CRLF (Windows) line ends are read as they are.
    const crlf = write(`name: job\r\nsource:\r\n  directory: ${dir.queue}\r\nhandler:\r\n  command: [echo, "{path}"]\r\n`, 'crlf.yaml');
    expect(loadConfig(crlf).name).toBe('job');
  });

  it('names the absolute path of a missing file', () => {
    const missing = path.join(dir.root, 'nope.yaml');
    const err = configError(() => loadConfig(missing));
    expect(err.message).toBe(`config file not found: ${missing}`);
    expect(err.key).toBeUndefined();
    expect(err.file).toBe(missing);
  });

  // CRONSAFE_CONFIG=/etc/cronsafe, the ConfigMap's mount, not the file in it: the error said
  // only "cannot read config file /etc/cronsafe: EISDIR".
  it('a directory or a loop of links given as the config says what it is, and a directory which files it holds', () => {
    write('x: 1\n', 'mount/job.yaml');
    write('x: 1\n', 'mount/README');
    const mount = path.join(dir.root, 'mount');
    expect(configError(() => loadConfig(mount)).message).toBe(`config file ${mount} is a directory: give the config file in it (job.yaml)`);
    const empty = path.join(dir.queue);
    expect(configError(() => loadConfig(empty)).message).toBe(`config file ${empty} is a directory: give the config file in it`);
    symlinkSync('b', path.join(dir.root, 'a'));
    symlinkSync('a', path.join(dir.root, 'b'));
    expect(configError(() => loadConfig(path.join(dir.root, 'a'))).message).toBe(`cannot read config file ${path.join(dir.root, 'a')}: a loop of symbolic links (ELOOP)`);
  });

  it('names file, line and column of a YAML syntax error', () => {
    const file = write('name: ok\nsource:\n  directory: /x\n  include: [a, b\nhandler: {}\n');
    const err = configError(() => loadConfig(file));
    expect(err.message).toBe(
      `${file}:5:1: invalid YAML: Flow sequence in block collection must be sufficiently indented and end with a ]`,
    );
    expect(err.key).toBeUndefined();
  });

  it('an unquoted cron expression starting with "*" or "@" is one error that says to quote it, not an "alias" error per star', () => {
    const stars = write('name: ok\nsource: {directory: /x}\nhandler: {command: ["true"]}\nschedule:\n  cron: */5 * * * *   # every 5 minutes\n');
    expect(configError(() => loadConfig(stars)).message).toBe(`${stars}:5:9: invalid YAML: a value that starts with "*" must be quoted: write cron: "*/5 * * * *"`);
    const macro = write('name: ok\nsource: {directory: /x}\nhandler: {command: ["true"]}\nschedule:\n  cron: @daily\n');
    expect(configError(() => loadConfig(macro)).message).toBe(`${macro}:5:9: invalid YAML: a value that starts with "@" must be quoted: write cron: "@daily"`);
  });

  it('an empty schedule.cron or schedule.timeZone is one error, not two in two wordings', () => {
    const zone = minimal('schedule:\n  cron: "*/5 * * * *"\n  timeZone: ""\n');
    expect(configError(() => loadConfig(zone)).message).toBe(`${zone}: schedule.timeZone: expected an IANA time zone name, got ""`);
    const cron = minimal('schedule:\n  cron: ""\n');
    expect(configError(() => loadConfig(cron)).message).toBe(`${cron}: schedule.cron: expected a cron expression, got ""`);
  });

  // The checks added after str() (a pattern, a URL) ran on "" too: two lines for one value,
  // the pushgateway's in two wordings (`got ""`, then `got 0 characters ... may be a password`).
  it('any other empty string value is one error too', () => {
    for (const [yaml, key, expected] of [
      ['state: {schema: ""}', 'state.schema', 'a schema name'],
      ['state: {postgres: ""}', 'state.postgres', 'a postgres:// or postgresql:// URL'],
      ['metrics: {pushgateway: ""}', 'metrics.pushgateway', 'an http:// or https:// URL'],
      ['lock: {kubernetesLease: {name: ""}}', 'lock.kubernetesLease.name', 'a Lease name'],
      ['lock: {kubernetesLease: {namespace: ""}}', 'lock.kubernetesLease.namespace', 'a namespace'],
    ]) {
      const file = minimal(`${yaml}\n`);
      expect(configError(() => loadConfig(file)).message).toBe(`${file}: ${key}: expected ${expected}, got ""`);
    }
  });

  // `command: [sleep, 5]`: YAML reads the 5 as a number. The error said only "expected a
  // string, got 5", where handler.env's says to quote it.
  it('a number or boolean in handler.command says to quote it', () => {
    const file = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [sleep, 5, true]}\n`);
    const hint = 'expected a string (quote numbers and booleans in YAML: "5", "true")';
    expect(configError(() => loadConfig(file)).message).toBe(`${file}: handler.command[1]: ${hint}, got 5\n${file}: handler.command[2]: ${hint}, got true`);
  });

  it('rejects a duplicate key with its line and its key', () => {
    const file = write('name: a\nsource: {directory: /x}\nname: b\n');
    const err = configError(() => loadConfig(file));
    expect(err.message).toBe(`${file}:3:1: name: invalid YAML: duplicate key (a mapping holds each key once)`);
    expect(err.key).toBe('name');
    const nested = write('name: a\nhandler:\n  command: [x]\n  timeoutSeconds: 3\n  timeoutSeconds: 4\n', 'nested.yaml');
    expect(configError(() => loadConfig(nested)).message).toBe(
      `${nested}:5:3: handler.timeoutSeconds: invalid YAML: duplicate key (a mapping holds each key once)`,
    );
    const inList = write('name: a\nsource: {directory: /x, include: [{a: 1, a: 2}]}\n', 'list.yaml');
    expect(configError(() => loadConfig(inList)).message).toBe(
      `${inList}:2:42: source.include[0].a: invalid YAML: duplicate key (a mapping holds each key once)`,
    );
  });

  it('rejects a duplicate key written as an alias, and a key that is a list or mapping', () => {
    // `*k` names the key `&k` marks: validate said OK and the second value won (concurrency 64).
    const alias = write('name: a\nsource: {directory: /x}\n&k concurrency: 2\n*k : 64\n', 'alias-key.yaml');
    const err = configError(() => loadConfig(alias));
    expect(err.message).toBe(`${alias}:4:1: concurrency: invalid YAML: duplicate key (a mapping holds each key once)`);
    expect(err.key).toBe('concurrency');
    const env = write('name: a\nsource: {directory: /x}\nhandler:\n  command: [x]\n  env: {&v TOKEN: a, *v : b}\n', 'alias-env.yaml');
    expect(configError(() => loadConfig(env)).message).toBe(`${env}:5:22: handler.env.TOKEN: invalid YAML: duplicate key (a mapping holds each key once)`);
    // Read as the text "[ A, B ]", with a Node warning about mapAsMap on stderr.
    const listKey = write('name: a\nsource: {directory: /x}\nhandler:\n  command: [x]\n  env:\n    ? [A, B]\n    : x\n', 'list-key.yaml');
    expect(configError(() => loadConfig(listKey)).message).toBe(`${listKey}:6:7: handler.env.["A","B"]: invalid YAML: a key that is a list or mapping (keys are names)`);
  });

  // The library reads a null key as "": the error said `"": unknown key` (`handler."": unknown
  // key`), naming nothing that was written.
  it('a key written ~, null or left empty says it is YAML null, naming it as written', () => {
    const tilde = write('name: a\nsource: {directory: /x}\n~: 1\n', 'tilde-key.yaml');
    const err = configError(() => loadConfig(tilde));
    expect(err.message).toBe(`${tilde}:3:1: ~: invalid YAML: the key ~ is YAML null, not a name: write the key meant (quoted, "~", if that is the name)`);
    expect(err.key).toBe('~');
    const word = write('name: a\nsource: {directory: /x}\nhandler:\n  command: [x]\n  NULL: 3\n', 'null-key.yaml');
    expect(configError(() => loadConfig(word)).message).toBe(
      `${word}:5:3: handler.NULL: invalid YAML: the key NULL is YAML null, not a name: write the key meant (quoted, "NULL", if that is the name)`,
    );
    const empty = write('name: a\nsource: {directory: /x}\nlease:\n  : 30\n', 'empty-key.yaml');
    expect(configError(() => loadConfig(empty)).message).toBe(`${empty}:4:3: lease: invalid YAML: a key left empty is YAML null, not a name: write the key meant`);
    // Quoted, it is a name, and an unknown one.
    expectProblem(write('name: a\nsource: {directory: /x}\nhandler: {command: [x]}\n"~": 1\n', 'quoted-key.yaml'), '~', 'unknown key');
  });

  it('rejects a key or value holding bytes that are not UTF-8, naming its line and key', () => {
    // A Latin-1 file: the exclude was read as "caf\uFFFD.txt" and excluded nothing, silently.
    const latin1 = write('x');
    writeFileSync(latin1, Buffer.concat([Buffer.from(`name: job\nsource:\n  directory: ${dir.queue}\n  exclude: ["caf`), Buffer.from([0xe9]), Buffer.from('.txt"]\nhandler: {command: [echo]}\n')]));
    const err = configError(() => loadConfig(latin1));
    const offset = Buffer.byteLength(`name: job\nsource:\n  directory: ${dir.queue}\n  exclude: ["caf`);
    expect(err.message).toBe(
      `${latin1}:4:13: source.exclude[0]: invalid YAML: bytes that are not UTF-8, the first at byte offset ${offset} (\\xe9) (a file saved as Latin-1 or UTF-16?): save the file as UTF-8; a file name that is not UTF-8 is written as its id, with \\xHH escapes (caf\\xe9.txt)`,
    );
    expect(err.key).toBe('source.exclude[0]');
    // In a comment they change nothing; a real U+FFFD in a UTF-8 file is a character like any other.
    const comment = write('x', 'comment.yaml');
    writeFileSync(comment, Buffer.concat([Buffer.from('# caf'), Buffer.from([0xe9]), Buffer.from(`\nname: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [echo]}\n`)]));
    expect(loadConfig(comment).name).toBe('job');
    // UTF-16 (as Windows editors save "Unicode"): read as one scalar, no key to name.
    const utf16 = write('x', 'utf16.yaml');
    writeFileSync(utf16, Buffer.from(`\uFEFFname: job\n`, 'utf16le'));
    expect(configError(() => loadConfig(utf16)).message).toMatch(new RegExp(`^${utf16.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:1:1: invalid YAML: bytes that are not UTF-8, the first at byte offset 0 \\(\\\\xff\\) `));
    const replacement = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [echo, "\uFFFD"]}\n`, 'utf8.yaml');
    expect(loadConfig(replacement).handler.command).toEqual(['echo', '\uFFFD']);
  });

  it('rejects a second document and an alias bomb', () => {
    const two = write('name: a\n---\nname: b\n');
    expect(configError(() => loadConfig(two)).message).toBe(
      `${two}:2:1: invalid YAML: expected one document, found a second one (remove the "---" line)`,
    );
    let bomb = 'a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n';
    for (let i = 1; i < 9; i++) bomb += `a${i}: &a${i} [${Array(10).fill(`*a${i - 1}`).join(', ')}]\n`;
    const file = write(bomb, 'bomb.yaml');
    // Where the library's toJS would stop (10 uses of &a1 times the 11 of &a0 in it), with the line and key.
    expect(configError(() => loadConfig(file)).message).toBe(
      `${file}:3:50: a2[8]: invalid YAML: the alias *a1 makes more than 100 uses of an anchor's content, counting the aliases inside it (an "alias bomb"?): write the values out`,
    );
  });

  it('rejects an alias inside the node it names (a cycle), naming its line and key, not a stack overflow', () => {
    const map = write('name: a\nsource: {directory: /x}\nhandler: &h {command: ["true"], env: {A: *h}}\n');
    const err = configError(() => loadConfig(map));
    expect(err.message).toBe(`${map}:3:42: handler.env.A: invalid YAML: the alias *h is inside the node it names (&h), which would contain itself without end`);
    expect(err.key).toBe('handler.env.A');
    const seq = write('name: a\nx: &x [1, [2, *x]]\n', 'seq.yaml');
    expect(configError(() => loadConfig(seq)).message).toMatch(/^.*seq\.yaml:2:\d+: x\[1\]\[1\]: invalid YAML: the alias \*x is inside/);
    // An alias of an earlier, finished node is no cycle: the value is copied, checked as written.
    const copy = write('name: a\nsource: &s {directory: /x}\nhandler: {command: ["true"]}\nx: *s\n', 'copy.yaml');
    expect(configError(() => loadConfig(copy)).message).toBe(`${copy}: x: unknown key`);
  });

  // A password written unquoted that starts with "*" is an alias: the error said "Unresolved
  // alias (the anchor must be set before the alias): <the rest of the password>", into the
  // pod's log, with neither line nor key.
  it('an alias with no anchor before it names its line and key, and never quotes the alias (it may be a password)', () => {
    const file = write('name: a\nsource: {directory: /x}\nhandler:\n  command: ["true"]\n  env:\n    DB_PASSWORD: *Hunter2Secret\n');
    const err = configError(() => loadConfig(file));
    expect(err.message).toBe(
      `${file}:6:18: handler.env.DB_PASSWORD: invalid YAML: an alias ("*name") with no anchor ("&name") before it: a value that starts with "*" must be quoted`,
    );
    expect(err.message).not.toContain('Hunter2');
    expect(err.key).toBe('handler.env.DB_PASSWORD');
  });

  // A value written unquoted that starts with "!" is a YAML tag: `PW: !Hunter2Secret` was the
  // empty string, `PW: !Hunter2 Secret` was "Secret", and validate said OK.
  it('a tag cronsafe cannot apply is refused, naming its line and key, not dropped from the value', () => {
    const bare = write('name: a\nsource: {directory: /x}\nhandler:\n  command: ["true"]\n  env:\n    DB_PASSWORD: !Hunter2Secret\n');
    const err = configError(() => loadConfig(bare));
    expect(err.message).toBe(
      `${bare}:6:18: handler.env.DB_PASSWORD: invalid YAML: a tag ("!name" before the value) that cannot be applied: a value that starts with "!" must be quoted, and a standard tag (!!int, !!bool, ...) must fit its value`,
    );
    expect(err.message).not.toContain('Hunter2');
    expect(err.key).toBe('handler.env.DB_PASSWORD');
    const rest = minimal('retry: {maxAttempts: !!float 4}\nx: [!Hunter2 Secret]\n');
    expect(configError(() => loadConfig(rest)).message).toMatch(/^.*cronsafe\.yaml:4:22: retry\.maxAttempts: invalid YAML: a tag /);
    // On a list, the key is the list's (it was `x[-1]`).
    const list = minimal('x: !Hunter2 [a]\n');
    expect(configError(() => loadConfig(list)).key).toBe('x');
    // The standard tags that fit still apply (YAML 1.1's type tags keep their text: tested below).
    expect(loadConfig(minimal('concurrency: !!int "4"\nlog: {level: !!str silent}\n')).concurrency).toBe(4);
  });

  // `%YAML 1.1` made the parser read YAML 1.1: !!omap and !!set became empty mappings again
  // (retry.maxAttempts and an unknown key in them ignored), `on` was true and `010` was 8.
  it('a %YAML 1.1 directive is refused: the config is read as YAML 1.2', () => {
    const file = write('%YAML 1.1\n---\nname: a\nsource: {directory: /x}\nhandler: {command: ["true"]}\nretry: !!omap [{maxAttempts: 2}, {bogus: 1}]\n');
    const err = configError(() => loadConfig(file));
    expect(err.message).toBe(
      `${file}:1:1: invalid YAML: %YAML 1.1: cronsafe reads YAML 1.2 (yes, no, on and off are strings, 010 is ten, no "<<" merge keys, no !!omap or !!set): remove the directive`,
    );
    expect(loadConfig(write(`%YAML 1.2\n---\nname: a\nsource: {directory: ${dir.queue}}\nhandler: {command: ["true"]}\n`, 'v12.yaml')).name).toBe('a');
  });

  it('rejects an empty file and a top-level list', () => {
    const empty = write('# nothing\n');
    expect(configError(() => loadConfig(empty)).message).toBe(
      `${empty}: the file is empty; expected a mapping with at least name, source and handler`,
    );
    const list = write('- a\n', 'list.yaml');
    expect(configError(() => loadConfig(list)).message).toBe(`${list}: expected a mapping at the top level, got a list`);
  });

  // `-c .env`, or CRONSAFE_CONFIG naming a mounted Secret's key or a token: the whole file is
  // one YAML string, which the error quoted (its first 77 characters) to stderr and the log.
  it('a file that is one string (a .env file, a token) is refused without its text', () => {
    const dotenv = write('DB_PASSWORD=Zq7hunter2\nAPI_KEY=abcdef\n', '.env');
    const err = configError(() => loadConfig(dotenv)).message;
    expect(err).toBe(
      `${dotenv}: expected a mapping at the top level, got a string of 37 characters (not shown: a file that is not a config, such as a .env file or a token, may hold a secret; NAME=value is a .env file's form, YAML's is key: value)`,
    );
    const token = write('eyJhbGciOiJSUzI1NiJ9.Zq7hunter2', 'token');
    expect(configError(() => loadConfig(token)).message).toBe(
      `${token}: expected a mapping at the top level, got a string of 31 characters (not shown: a file that is not a config, such as a .env file or a token, may hold a secret)`,
    );
    expect(configError(() => loadConfig(write('42\n', 'n.yaml'))).message).toMatch(/expected a mapping at the top level, got 42$/);
  });
});

describe('loadConfig: size cap', () => {
  const tooBig = (file: string) => `config file ${file} is larger than the 1 MiB limit (1048576 bytes)`;

  it('reads a config of exactly 1 MiB, and refuses a valid config one byte longer, naming the file', () => {
    const head = `name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [echo, "{path}"]}\n#`;
    const at = write(`${head}${'x'.repeat(MAX_CONFIG_BYTES - head.length - 1)}\n`);
    expect(loadConfig(at).name).toBe('job');
    const over = write(`${head}${'x'.repeat(MAX_CONFIG_BYTES - head.length)}\n`, 'over.yaml');
    const err = configError(() => loadConfig(over));
    expect(err.message).toBe(tooBig(over));
    expect(err.file).toBe(over);
  });

  it('reads a FIFO whose writer comes only later (the open never blocks the process)', () => {
    const fifo = path.join(dir.root, 'late.yaml');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const config = `name: late\nsource: {directory: ${dir.queue}}\nhandler: {command: ["true"]}\n`;
    const writer = spawn(process.execPath, ['-e', `setTimeout(()=>require('fs').writeFileSync(${JSON.stringify(fifo)}, ${JSON.stringify(config)}), 300)`]);
    try {
      expect(loadConfig(fifo, { checkPaths: false }).name).toBe('late');
    } finally {
      writer.kill('SIGKILL');
    }
  });

  it('reads at most the cap from a FIFO whose writer never stops', async () => {
    const fifo = path.join(dir.root, 'fifo.yaml');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    // A separate process: opening a FIFO for reading blocks until a writer opens it.
    const writer = spawn(process.execPath, ['-e', `const fs=require('fs');const fd=fs.openSync(${JSON.stringify(fifo)},'w');const b=Buffer.alloc(65536,35);try{for(;;)fs.writeSync(fd,b)}catch{}`]);
    try {
      expect(configError(() => loadConfig(fifo)).message).toBe(tooBig(fifo));
    } finally {
      writer.kill('SIGKILL');
    }
  });
});

describe('loadConfig: invalid values name the key', () => {
  it('a YAML merge key "<<" says it is not supported, rather than only "unknown key"', () => {
    const file = write('name: job\nsource: {directory: /x}\nhandler:\n  <<: {timeoutSeconds: 3}\n  command: [echo]\n', 'merge.yaml');
    expectProblem(file, 'handler.<<', 'unknown key (YAML merge keys "<<" are not supported: write the keys out)');
  });

  it('unknown keys, top level and nested, with a suggestion', () => {
    expectProblem(minimal('concurency: 3\n'), 'concurency', 'unknown key (did you mean "concurrency"?)');
    // A known key cut short is that key: "handler.timeout" had no hint (7 edits away).
    const timeout = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [echo], timeout: 30}\n`, 'timeout.yaml');
    expectProblem(timeout, 'handler.timeout', 'unknown key (did you mean "timeoutSeconds"?)');
    const file = write(`name: job\nsource: {directory: ${dir.queue}, direktory: x}\nhandler: {command: [echo]}\n`);
    expectProblem(file, 'source.direktory', 'unknown key (did you mean "directory"?)');
    expectProblem(minimal('lease: {seconds: 90, zzz: 1}\n'), 'lease.zzz', 'unknown key');
  });

  it("YAML 1.1's !!omap and !!set are not read as empty mappings whose keys are all ignored", () => {
    // !!omap became a JS Map, which passed as a mapping with no keys: log.level silent was
    // ignored, and so was the typo "levl" (unknown keys are errors at every level).
    expectProblem(minimal('log: !!omap [{levl: silent}]\n'), 'log', 'expected a mapping, got a list');
    expectProblem(minimal('log: !!set {levl}\n'), 'log.levl', 'unknown key (did you mean "level"?)');
    expectProblem(minimal('concurrency: !!timestamp 2020-01-01\n'), 'concurrency', 'expected an integer from 1 to 1024, got "2020-01-01"');
  });

  it('state.sqlite and lock.path ending in "/" (a directory) are refused, not created as a file of that name', () => {
    // `lock.path: ./locks/` made a file named "locks", `state.sqlite: ./st/` a ledger named "st".
    expectProblem(minimal('lock: {path: ./locks/}\n'), 'lock.path', 'expected the path of a file, not of a directory: add the file\'s name (e.g. <directory>/<name>.lock), got "./locks/"');
    expectProblem(minimal('state: {sqlite: st/.}\n'), 'state.sqlite', 'expected the path of a file, not of a directory: add the file\'s name (e.g. <directory>/<name>.db), got "st/."');
    expect(loadConfig(minimal('state: {sqlite: ./.st}\nlock: {path: ..lock}\n')).state.sqlite).toBe(path.join(dir.root, '.st'));
  });

  it('a path with a leading "~" is refused: not the home directory, but a directory "~" beside the config', () => {
    const tilde = 'expected a path without a leading "~": cronsafe does not expand it to the home directory (a shell would), so it names a directory "~" beside the config; write the absolute path, or ${HOME}/...';
    // Before, the run made <config dir>/~/state/job.db.
    expectProblem(minimal('state: {sqlite: ~/state/job.db}\n'), 'state.sqlite', `${tilde}, got "~/state/job.db"`);
    expectProblem(minimal('output: {directory: ~/out}\n'), 'output.directory', `${tilde}, got "~/out"`);
    expectProblem(minimal('lock: {path: "~"}\n'), 'lock.path', `${tilde}, got "~"`);
    // A "~" elsewhere in a name is a character like any other; ${HOME} is the way to the home directory.
    const config = loadConfig(minimal('state: {sqlite: ~job.db}\noutput: {directory: "${HOME}/out~"}\n'), { env: { HOME: dir.root } });
    expect(config.state.sqlite).toBe(path.join(dir.root, '~job.db'));
    expect(config.output?.directory).toBe(path.join(dir.root, 'out~'));
  });

  it('a glob the scan cannot compile is refused here, not at every run (exit 1 after validate said OK)', () => {
    const long = `${'*'.repeat(70_000)}x`;
    const file = write(`name: job\nsource: {directory: ${dir.queue}, exclude: ["${long}"]}\nhandler: {command: [echo]}\n`, 'long-glob.yaml');
    expectProblem(file, 'source.exclude[0]', 'expected a glob the scan can compile: Input length: 70001, exceeds maximum allowed length: 65536');
  });

  it('a glob picomatch makes into a regular expression JavaScript refuses is refused here: the scan matched nothing with it, silently', () => {
    // `[z-a]`, and a range between characters outside the BMP (two UTF-16 units each).
    const file = write(`name: job\nsource: {directory: ${dir.queue}, include: ["**"], exclude: ["keep", "[z-a]*"]}\nhandler: {command: [echo]}\n`, 'range-glob.yaml');
    expectProblem(file, 'source.exclude[1]', 'expected a glob the scan can compile: Range out of order in character class');
    const astral = write(`name: job\nsource: {directory: ${dir.queue}, include: ["{x,[😀-😂]}/**"]}\nhandler: {command: [echo]}\n`, 'astral-glob.yaml');
    expectProblem(astral, 'source.include[0]', 'expected a glob the scan can compile: Range out of order in character class');
  });

  it('a dotted key is quoted and told to nest, not shown as the documented key it spells', () => {
    // Was `drain.gracePeriodSeconds: unknown key`, as if the key in the docs did not exist.
    expectProblem(minimal('"drain.gracePeriodSeconds": 60\n'), '"drain.gracePeriodSeconds"', 'unknown key (a "." in a key does not nest mappings: write drain: {gracePeriodSeconds: ...})');
    expectProblem(minimal('"lock.kubernetesLease.name": x\n'), '"lock.kubernetesLease.name"', 'unknown key (a "." in a key does not nest mappings: write lock: {kubernetesLease: {name: ...}})');
    expectProblem(minimal('lease: {"renew.Seconds": 3}\n'), 'lease."renew.Seconds"', 'unknown key (did you mean "renewSeconds"?)');
    expectProblem(minimal('"": 1\n'), '""', 'unknown key');
  });

  it('wrong types', () => {
    expectProblem(minimal('concurrency: eight\n'), 'concurrency', 'expected an integer from 1 to 1024, got "eight"');
    expectProblem(minimal('retry: 5\n'), 'retry', 'expected a mapping, got 5');
    expectProblem(minimal('log: {level: loud}\n'), 'log.level',
      'expected one of "fatal", "error", "warn", "info", "debug", "trace", "silent", got "loud"');
    const file = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [echo], env: {N: 1}}\n`);
    expectProblem(file, 'handler.env.N', 'expected a string (quote numbers and booleans in YAML), got a number (not shown: it may be a secret)');
  });

  it('missing required keys', () => {
    expectProblem(write('name: job\nhandler: {command: [echo]}\n'), 'source', 'is required (expected a mapping)');
    const noHandler = `name: job\nsource: {directory: ${dir.queue}}\n`;
    expectProblem(write(noHandler), 'handler', 'is required (expected a mapping)');
    expectProblem(write(`${noHandler}handler: null\n`), 'handler', 'expected a mapping, got null');
    expectProblem(write(`${noHandler}handler: {command: "echo {path}"}\n`), 'handler.command',
      'expected a list of strings (argv), got "echo {path}"');
  });

  it('a number past 2^53 is one problem, said once', () => {
    const file = minimal('concurrency: 99999999999999999999999\n');
    expect(configError(() => loadConfig(file)).message).toBe(`${file}: concurrency: expected an integer from 1 to 1024, got 1e+23`);
  });

  it('out of range values', () => {
    expectProblem(minimal('concurrency: 0\n'), 'concurrency', 'expected an integer from 1 to 1024, got 0');
    expectProblem(minimal('concurrency: 1025\n'), 'concurrency', 'expected an integer from 1 to 1024, got 1025');
    expectProblem(minimal('retention: {runs: 5}\n'), 'retention.runs', 'expected an integer from 20 to 10000000, got 5');
    expectProblem(minimal('retention: {days: 0}\n'), 'retention.days', 'expected an integer from 1 to 36500, got 0');
    expectProblem(minimal('retention: {forgetMissingAfterDays: 1.5}\n'), 'retention.forgetMissingAfterDays', 'expected an integer from 1 to 36500, got 1.5');
    expectProblem(minimal('concurrency: 2.5\n'), 'concurrency', 'expected an integer from 1 to 1024, got 2.5');
    expectProblem(minimal('queueSize: 0\n'), 'queueSize', 'expected an integer >= 1, got 0');
    expectProblem(minimal('metrics: {port: 70000}\n'), 'metrics.port', 'expected an integer from 1 to 65535, got 70000');
    expectProblem(minimal('retry: {maxAttempts: 0}\n'), 'retry.maxAttempts', 'expected an integer >= 1, got 0');
    const t = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [echo], timeoutSeconds: 0}\n`);
    expectProblem(t, 'handler.timeoutSeconds', 'expected a number of seconds > 0 and <= 2147483, got 0');
  });

  it('bad names', () => {
    const name = (n: string) => write(`name: ${n}\nsource: {directory: ${dir.queue}}\nhandler: {command: [echo]}\n`);
    expectProblem(name('Caption_QC'), 'name',
      'expected lowercase letters, digits and "-", starting and ending with a letter or digit, got "Caption_QC"');
    expectProblem(name('a'.repeat(53)), 'name', `expected at most 52 characters, got "${'a'.repeat(53)}"`);
  });

  it('handler needs exactly one of command and module', () => {
    const both = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [echo], module: ./x.js}\n`);
    expectProblem(both, 'handler', 'expected exactly one of command or module, got both');
    const neither = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {timeoutSeconds: 5}\n`);
    expectProblem(neither, 'handler', 'expected exactly one of command or module, got neither');
  });

  it('placeholders', () => {
    const unknown = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [qc, "{path}", "--in={file}"]}\n`);
    expectProblem(unknown, 'handler.command[2]', 'unknown placeholder {file} (known: {path} {id} {output} {attempt})');
    const noOut = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [qc, "{output}"]}\n`);
    expectProblem(noOut, 'handler.command[1]', '{output} is used but output.directory is not set');
    const ok = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [cat, "{output}"]}\noutput: {directory: out}\n`);
    expect(loadConfig(ok).handler.command).toStrictEqual(['cat', '{output}']);
    // Shell syntax for a child shell passes; a known name inside it still counts.
    const shell = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [sh, -c, 'cat "$\${HOME}/x" {path}']}\n`);
    expect(loadConfig(shell).handler.command).toStrictEqual(['sh', '-c', 'cat "${HOME}/x" {path}']);
    const shellOut = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [sh, -c, 'echo $\${output}']}\n`);
    expectProblem(shellOut, 'handler.command[2]', '{output} is used but output.directory is not set');
  });

  it('schedule: the scheduler\'s own cron and zone checks, under the schedule.* keys', () => {
    // The wording after the key belongs to src/schedule; here: the key, the file, the bad value.
    const bad = (yaml: string, key: string, start: string) => {
      const file = minimal(yaml);
      const err = configError(() => loadConfig(file));
      expect(err.key).toBe(key);
      expect(err.message.startsWith(`${file}: ${key}: ${start}`), err.message).toBe(true);
    };
    bad('schedule: {cron: "* * * * *", timeZone: Europe/Londn}\n', 'schedule.timeZone', 'unknown time zone "Europe/Londn"');
    bad('schedule: {cron: "* * * * *", timeZone: europe/london}\n', 'schedule.timeZone', 'unknown time zone "europe/london"');
    bad('schedule: {cron: "0 * * * * *"}\n', 'schedule.cron', 'cron expression "0 * * * * *": expected 5 fields');
    bad('schedule: {cron: "61 * * * *"}\n', 'schedule.cron', 'minute field "61"');
    const ok = loadConfig(minimal('schedule: {cron: "@daily", timeZone: Asia/Kolkata}\n')).schedule;
    expect(ok).toStrictEqual({ cron: '@daily', timeZone: 'Asia/Kolkata', refresh: 'never', repeatedFire: 'run' });
  });

  it('cross-key rules: lease, drain, retry, state', () => {
    expectProblem(minimal('lease: {seconds: 30, renewSeconds: 30}\n'), 'lease.renewSeconds',
      'must be less than lease.seconds (30), got 30');
    // The default renewSeconds (30) is checked too.
    expectProblem(minimal('lease: {seconds: 20}\n'), 'lease.renewSeconds', 'must be less than lease.seconds (20), got 30');
    expectProblem(minimal('drain: {gracePeriodSeconds: 5, marginSeconds: 5}\n'), 'drain.marginSeconds',
      'must be less than drain.gracePeriodSeconds (5), got 5');
    // A margin under a second: the drain's last resort exits with the kubelet's SIGKILL (at it, with 0).
    for (const margin of ['0', '0.5']) {
      expectProblem(minimal(`drain: {marginSeconds: ${margin}}\n`), 'drain.marginSeconds',
        `must be at least 1 (seconds), got ${margin}: after the drain's deadline the margin kills the handlers, hands their claims back and exits before the kubelet's SIGKILL, ` +
          "and the drain's last resort exits a sixth of it before drain.gracePeriodSeconds; with less, that exit comes with the SIGKILL and the claims are charged");
    }
    expect(loadConfig(minimal('drain: {gracePeriodSeconds: 2, marginSeconds: 1}\n')).drain).toStrictEqual({ gracePeriodSeconds: 2, marginSeconds: 1 });
    expectProblem(minimal('retry: {backoffSeconds: 60, backoffMaxSeconds: 10}\n'), 'retry.backoffMaxSeconds',
      'must be >= retry.backoffSeconds (60), got 10');
    // A retry time past what a Date can hold failed every run with "Invalid time value" (exit 1).
    expect(configError(() => loadConfig(minimal('retry: {backoffSeconds: 1e300}\n'))).message).toContain(
      'retry.backoffSeconds: expected a number of seconds >= 0 and <= 3153600000 (100 years), got 1e+300');
    expectProblem(minimal('retry: {backoffMaxSeconds: 1e13}\n'), 'retry.backoffMaxSeconds',
      'expected a number of seconds >= 0 and <= 3153600000 (100 years), got 10000000000000');
    expectProblem(minimal('state: {sqlite: a.db, postgres: "postgres://h/db"}\n'), 'state',
      'expected at most one of sqlite or postgres, got both');
  });

  it('reports every problem, one per line, keeping the first key', () => {
    const file = minimal('concurrency: 0\nlog: {format: xml}\nbogus: 1\n');
    const err = configError(() => loadConfig(file));
    expect(err.message.split('\n')).toStrictEqual([
      `${file}: concurrency: expected an integer from 1 to 1024, got 0`,
      `${file}: log.format: expected one of "json", "pretty", got "xml"`,
      `${file}: bogus: unknown key`,
    ]);
    expect(err.key).toBe('concurrency');
  });

  it('checks cross-key rules even when other keys are wrong', () => {
    const file = write(
      `name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [qc, "{output}"], module: x.js, env: {N: 1}}\nconcurrency: 0\n`,
    );
    expect(configError(() => loadConfig(file)).message.split('\n')).toStrictEqual([
      `${file}: handler.env.N: expected a string (quote numbers and booleans in YAML), got a number (not shown: it may be a secret)`,
      `${file}: handler: expected exactly one of command or module, got both`,
      `${file}: concurrency: expected an integer from 1 to 1024, got 0`,
      `${file}: handler.command[1]: {output} is used but output.directory is not set`,
    ]);
  });

  it("refuses a state.schema PostgreSQL keeps for itself, before any connection (exit 78, not 1)", () => {
    // CREATE SCHEMA refuses pg_*; information_schema takes tables, but pg_dump leaves it out.
    for (const schema of ['pg_ledger', 'pg_temp', 'information_schema']) {
      const file = minimal(`state: {postgres: "postgres://app@db/x", schema: ${schema}}\n`);
      expect(configError(() => loadConfig(file)).message).toMatch(new RegExp(`^${file}: state\\.schema: .*reserved.*got "${schema}"$`));
    }
    expect(() => loadConfig(minimal('state: {postgres: "postgres://app@db/x", schema: pgledger}\n'))).not.toThrow();
  });

  it('never prints a password in an error', () => {
    const file = minimal('state: {postgres: "mysql://app:s3cret@db/x"}\n');
    expect(configError(() => loadConfig(file)).message).toBe(`${file}: state.postgres: expected a postgres:// or postgresql:// URL, got "mysql://app:***@db/x"`);
  });

  // The library's syntax errors quoted the text they stopped at: for a password written
  // unquoted, its start ("Could not resolve tag: !e!Hunter2...", "Block scalar header
  // includes extra characters: |Hunter2..."), or its escapes in a double-quoted one.
  it('a YAML syntax error never quotes the value it is in (it may be a password)', () => {
    const env = (value: string, name: string) =>
      write(`name: job\nsource: {directory: ${dir.queue}}\nhandler:\n  command: [echo]\n  env:\n    DB_PASSWORD: ${value}\n`, name);
    const cases: Array<[string, string]> = [
      ['!e!Hunter2Secret', '6:18: invalid YAML: a tag with an undeclared handle ("!x!..."): a value that starts with "!" must be quoted'],
      ['|Hunter2Secret', '6:19: invalid YAML: characters after a block scalar indicator ("|" or ">"): a value that starts with "|" or ">" must be quoted'],
      ['>-Hunter2Secret', '6:20: invalid YAML: characters after a block scalar indicator ("|" or ">"): a value that starts with "|" or ">" must be quoted'],
      ['"Hunter2\\xZZSecret"', '6:26: invalid YAML: an escape sequence that YAML does not have, in a double-quoted string: write a backslash as \\\\, or quote the value with \' instead'],
    ];
    cases.forEach(([value, said], i) => {
      const file = env(value, `c${i}.yaml`);
      const message = configError(() => loadConfig(file)).message;
      expect(message).toBe(`${file}:${said}`);
      expect(message).not.toMatch(/Hunter|ZZ/);
    });
  });

  // `env: {PW: ${DB}, X: ...}`: unquoted in a flow mapping, the "{" of "${" opens a mapping, and
  // the library went on with one error per token left, each quoted (`Unexpected scalar token in
  // YAML stream: "Hunter2Secret"`): eleven lines, a literal secret among them, no word of why.
  it('an unquoted "${" in a flow mapping is one error that says to quote it; tokens after the end are never quoted', () => {
    const head = 'name: job\nsource: {directory: /x}\nhandler:\n  command: [echo]\n';
    const flow = write(`${head}  env: {PW: \${DB}, X: Hunter2Secret, Y: 1}\n`, 'flow.yaml');
    expect(configError(() => loadConfig(flow)).message).toBe(
      `${flow}:5:13: invalid YAML: a "\${" in a flow mapping or list ({...} or [...]) must be quoted: write "\${DB}"`,
    );
    // A default is not shown: it may be a password.
    const withDefault = write(`${head}  env: {PW: \${DB:-Hunter2Secret}}\n`, 'default.yaml');
    expect(configError(() => loadConfig(withDefault)).message).toBe(
      `${withDefault}:5:13: invalid YAML: a "\${" in a flow mapping or list ({...} or [...]) must be quoted: write "\${DB...}"`,
    );
    const after = write(`${head}  env: {PW: Hunter2Secret}}}, Q: Hunter3Secret}\n`, 'after.yaml');
    expect(configError(() => loadConfig(after)).message).toBe(`${after}:5:27: invalid YAML: Unexpected flow-map-end token in YAML stream`);
  });

  // `postgres://app:${DB_PASSWORD}@${DB_HOST}` with DB_HOST empty: validate said OK, and every
  // run failed with "Invalid URL" (exit 1): the pg driver takes an empty host only before "/".
  it('a postgres URL with nothing after "@" but a query or its end is refused, not left to fail every run', () => {
    const said = 'expected a host after "@" (or "/" then the database, for the local socket: postgres://user@/db), got "postgres://app:***@';
    expectProblem(minimal('state: {postgres: "postgres://app:s3cret@"}\n'), 'state.postgres', `${said}"`);
    expectProblem(minimal('state: {postgres: "postgres://app:s3cret@?sslmode=disable"}\n'), 'state.postgres', `${said}?sslmode=disable"`);
    expect(loadConfig(minimal('state: {postgres: "postgres://app:s3cret@/jobs?host=/run/postgresql"}\n')).state.postgres).toBe('postgres://app:s3cret@/jobs?host=/run/postgresql');
  });

  // `?statement_timeout=abc` passed validate and failed every run at the connect (the server's
  // 22023, exit 1); `30s` was read as 30 ms; libpq's `?connect_timeout=abc`, `?keepalives=x`
  // passed in silence; a `%zz` in the database name made errors show the redacted URL.
  it('a postgres URL parameter the driver or libpq cannot read, or a bad "%" in the database name, is named (the password never)', () => {
    const url = (rest: string) => minimal(`state: {postgres: "postgres://app:Hunter2pw@db:5432/${rest}"}\n`);
    const cases: Array<[string, string]> = [
      ['jobs?statement_timeout=abc', 'expected ?statement_timeout= to be a whole number of milliseconds from 0 to 2147483647, got "abc": the pg driver sends a value the server refuses at every connect (22023)'],
      ['jobs?lock_timeout=30s', 'expected ?lock_timeout= to be a whole number of milliseconds from 0 to 2147483647, got "30s": the pg driver reads only its leading digits (30 ms here), not a unit as libpq does'],
      ['jobs?idle_in_transaction_session_timeout=9999999999', 'expected ?idle_in_transaction_session_timeout= to be a whole number of milliseconds from 0 to 2147483647, got "9999999999": the pg driver sends a value the server refuses at every connect (22023)'],
      ['jobs?query_timeout=0', 'expected ?query_timeout= to be a whole number of milliseconds from 1 to 2147483647, got "0": the pg driver times each statement out after it, and after 1 ms for anything else'],
      ['jobs?connect_timeout=abc', 'expected ?connect_timeout= to be an integer, got "abc": libpq refuses it (the pg driver cronsafe uses ignores connect_timeout, but the same URL given to psql fails)'],
      ['jobs?keepalives=x', 'expected ?keepalives= to be an integer, got "x": libpq refuses it (the pg driver cronsafe uses ignores keepalives, but the same URL given to psql fails)'],
      ['jobs%zz', 'expected each "%" in the database name to start a %XX escape (two hex digits), got "%zz": write %25 for a "%" itself'],
      ['jobs%2', 'expected each "%" in the database name to start a %XX escape (two hex digits), got "%2": write %25 for a "%" itself'],
      ['jobs%C3', 'expected the database name\'s %XX escapes to spell UTF-8 text, got "jobs%C3"'],
      ['jobs?statement_timeout=-5', 'expected ?statement_timeout= to be a whole number of milliseconds from 0 to 2147483647, got "-5": the pg driver sends a value the server refuses at every connect (22023)'],
      ['jobs?statement_timeout=1.5', 'expected ?statement_timeout= to be a whole number of milliseconds from 0 to 2147483647, got "1.5": the pg driver reads only its leading digits (1 ms here), not a unit as libpq does'],
    ];
    for (const [rest, said] of cases) {
      const file = url(rest);
      expectProblem(file, 'state.postgres', said);
      expect(configError(() => loadConfig(file)).message).not.toContain('Hunter2pw');
    }
    // What the driver and libpq read as meant is taken; an empty value is none; a "%" of the password's own is written %25.
    for (const rest of ['jobs?statement_timeout=30000&lock_timeout=0&query_timeout=60000', 'jobs?statement_timeout=%2030000%20&query_timeout=+5000', 'j%C3%A9bs', 'jobs?connect_timeout=%205&keepalives=1&keepalives_idle=-1&tcp_user_timeout=', 'jo%2Fbs%25?statement_timeout=']) {
      expect(loadConfig(url(rest)).state.postgres).toBe(`postgres://app:Hunter2pw@db:5432/${rest}`);
    }
    expect(loadConfig(minimal('state: {postgres: "postgres://app:50%25off@db/jobs"}\n')).state.postgres).toBe('postgres://app:50%25off@db/jobs');
    // A raw one starting no escape: libpq refuses the URL (postgres-url-password-percent.test.ts).
    expectProblem(minimal('state: {postgres: "postgres://app:50%off@db/jobs"}\n'), 'state.postgres', 'expected each "%" in the user name and password to start a %XX escape (two hex digits; not shown: it may be the password): libpq refuses such a URL, and the pg driver then leaves its other escapes holding a letter (%2F) undecoded; write %25 for a "%" itself');
  });

  // A raw "?" in the password (refused: percent-encode it) made what follows it read as a query:
  // the refusal of a "schema=" there quoted the rest of the password, twice.
  it('a URL refused for a raw "?" or "/" in its password: no parameter after it is checked, so none of the password is quoted', () => {
    for (const pw of ['pa?schema=Hunter2pw', 'pa?statement_timeout=Hunter2pw', 'pa/%zzHunter2pw', 'pa#?search_path=Hunter2pw']) {
      const file = minimal(`state: {postgres: "postgres://app:${pw}@db/jobs"}\n`);
      const message = configError(() => loadConfig(file)).message;
      expect(message).toContain('state.postgres: expected a postgres:// or postgresql:// URL, with "/", "?", "#" and "@" in its user name and password percent-encoded');
      expect(message).not.toContain('Hunter2');
      expect(message.split('\n')).toHaveLength(1);
    }
  });

  // A port the URL parser refuses (`:70000`, `:abc`) was refused as a malformed URL with a
  // password to percent-encode: the user name and password were fine, the port was not.
  it('a URL whose own port is no port says so; where a raw "/" or "@" leaves the host unsure, the password hint stays and nothing of the password is quoted', () => {
    const port = 'expected the port (the URL\'s, or its ?port= parameter) to be a number from 1 to 65535, got';
    for (const [u, got] of [['postgres://app:Hunter2pw@db:70000/jobs', '"70000"'], ['postgres://app:Hunter2pw@[::1]:abc/jobs', '"abc"'], ['postgres://db:5432:5432/jobs', '"5432:5432"'], ['postgres://app:Hunter2pw@db:-1/jobs?application_name=a@b', '"-1"']] as const) {
      const message = configError(() => loadConfig(minimal(`state: {postgres: "${u}"}\n`))).message;
      expect(message).toContain(`state.postgres: ${port} ${got}`);
      expect(message).not.toContain('Hunter2');
    }
    for (const pw of ['a@b:Hunter2pw/x', 'pa/Hunter2pw', 'pa:Hunter2pw/x']) {
      const message = configError(() => loadConfig(minimal(`state: {postgres: "postgres://app:${pw}@db:99999/jobs"}\n`))).message;
      expect(message).toContain('percent-encoded (%2F, %3F, %23, %40)');
      expect(message).not.toContain('Hunter2');
    }
  });

  // A numeric password or PIN left unquoted in handler.env (or given for the URL) is a YAML
  // number: the error showed it ("got 31415926535") in the pod's log.
  it('never prints a number given where a secret goes (handler.env values, the URLs)', () => {
    const env = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [echo], env: {DB_PIN: 31415926535}}\n`, 'env.yaml');
    expectProblem(env, 'handler.env.DB_PIN', 'expected a string (quote numbers and booleans in YAML), got a number (not shown: it may be a secret)');
    expectProblem(minimal('state: {postgres: 27182818284}\n'), 'state.postgres', 'expected a postgres:// or postgresql:// URL, got a number (not shown: it may be a secret)');
    expectProblem(minimal('metrics: {pushgateway: 16180339887}\n'), 'metrics.pushgateway', 'expected an http:// or https:// URL, got a number (not shown: it may be a secret)');
    // Other keys still show what was found.
    expectProblem(minimal('concurrency: 5000\n'), 'concurrency', 'expected an integer from 1 to 1024, got 5000');
  });

  // A Secret's password key given where its URL was meant (`secretKeyRef: {key: password}`):
  // the whole value is the password, and the error put it in the pod's log.
  it('never prints a URL key\'s value that is no URL at all (a password given for the URL)', () => {
    const env = { PGURL: 'Tr0ub4dor&3', PUSH: 'hunter2hunter2' };
    const pg = minimal('state: {postgres: "${PGURL}"}\n');
    expect(configError(() => loadConfig(pg, { env })).message).toBe(
      `${pg}: state.postgres: expected a postgres:// or postgresql:// URL, got 11 characters with no "://" (not shown: it may be a password)`,
    );
    const push = minimal('metrics: {pushgateway: "${PUSH}"}\n');
    expect(configError(() => loadConfig(push, { env })).message).toBe(
      `${push}: metrics.pushgateway: expected an http:// or https:// URL, got 14 characters with no "://" (not shown: it may be a password)`,
    );
    const fromEnv = minimal();
    const err = configError(() => loadConfig(fromEnv, { env: { CRONSAFE_STATE_POSTGRES: 'Tr0ub4dor&3' } }));
    expect(err.message).not.toContain('Tr0ub4dor');
    expect(err.message).toContain('state.postgres: expected a postgres:// or postgresql:// URL, got 11 characters');
  });
});


describe('a config with a great many unknown keys', () => {
  it('is refused in linear time, with the first 50 problems and a count of the rest', () => {
    const keys = Array.from({ length: 20_000 }, (_, i) => `key${i}: 1`).join('\n');
    const file = write(`name: a\nsource: {directory: /x}\nhandler: {command: ["true"]}\n${keys}\n`);
    const err = configError(() => loadConfig(file, { checkPaths: false }));
    const lines = err.message.split('\n');
    expect(lines).toHaveLength(51);
    expect(lines[0]).toBe(`${file}: key0: unknown key`);
    expect(lines[50]).toBe(`${file}: ... and 19950 more problems`);
  });
});
