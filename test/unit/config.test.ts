import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { configSummary, loadConfig, redactUrl, resolveConfigPath } from '../../src/config/load.js';
import { urlSecrets } from '../../src/redact.js';
import type { Config } from '../../src/config/types.js';
import { configError, expectProblem, useConfigDir } from '../helpers/config-files.js';

const LOAD_TS = fileURLToPath(new URL('../../src/config/load.ts', import.meta.url));
const DEFAULT_CONCURRENCY = Math.min(8, 2 * os.availableParallelism());

const dir = useConfigDir();
const { write, minimal } = dir;

describe('loadConfig: valid files', () => {
  it('loads the DESIGN.md example with exact resolved values', () => {
    const file = write(`
name: caption-qc
source:
  directory: ${dir.queue}
  include: ["**/*.scc"]
  exclude: []
handler:
  command: ["python3", "qc.py", "{path}", "{output}"]
  timeoutSeconds: 300
output:
  directory: ${dir.root}/out
state:
  sqlite: ${dir.root}/state/cronsafe.db
concurrency: 8
queueSize: 32
lease: {seconds: 90, renewSeconds: 30}
retry: {maxAttempts: 5, backoffSeconds: 30, backoffMaxSeconds: 3600}
drain: {gracePeriodSeconds: 30, marginSeconds: 5}
lock: {path: ${dir.root}/state/cronsafe.lock}
schedule: {cron: "*/5 * * * *", timeZone: Europe/London, graceSeconds: 300, refresh: never}
metrics: {port: 9464, pushgateway: "http://pushgateway:9091"}
log: {level: info, format: json}
`);
    const expected: Config = {
      name: 'caption-qc',
      configPath: file,
      source: { directory: dir.queue, include: ['**/*.scc'], exclude: [] },
      handler: {
        command: ['python3', 'qc.py', '{path}', '{output}'],
        timeoutSeconds: 300,
        killAfterSeconds: 5,
        maxLogBytes: 65536,
        expectOutput: false,
        env: {},
      },
      output: { directory: `${dir.root}/out` },
      state: { sqlite: `${dir.root}/state/cronsafe.db`, allowNetworkFilesystem: false },
      concurrency: 8,
      queueSize: 32,
      lease: { seconds: 90, renewSeconds: 30 },
      retry: { maxAttempts: 5, backoffSeconds: 30, backoffMaxSeconds: 3600 },
      drain: { gracePeriodSeconds: 30, marginSeconds: 5 },
      lock: { path: `${dir.root}/state/cronsafe.lock`, allowNetworkFilesystem: false },
      schedule: { cron: '*/5 * * * *', timeZone: 'Europe/London', graceSeconds: 300, refresh: 'never', repeatedFire: 'run' },
      daemon: { tickSeconds: 30, growth: { enabled: false, cooldownSeconds: 300, maxIncompletePasses: 3 } },
      retention: { runs: 1000, days: 30, forgetMissingAfterDays: 30 },
      metrics: { port: 9464, pushgateway: 'http://pushgateway:9091', pushIntervalSeconds: 30 },
      log: { level: 'info', format: 'json' },
    };
    expect(loadConfig(file)).toStrictEqual(expected);
  });

  it('reads every key when none is at its default', () => {
    const file = write(`
name: x1
source: {directory: ${dir.queue}, include: ["a/**", "*.txt"], exclude: ["**/*.tmp"]}
handler:
  module: ./h.mjs
  timeoutSeconds: 12.5
  killAfterSeconds: 0
  maxLogBytes: 100
  expectOutput: true
  env: {MODE: fast}
output: {directory: ./out}
state: {postgres: "postgres://u:pw@db:5432/cs", allowNetworkFilesystem: true}
lock: {allowNetworkFilesystem: true}
concurrency: 3
queueSize: 7
lease: {seconds: 15, renewSeconds: 5}
retry: {maxAttempts: 2, backoffSeconds: 0, backoffMaxSeconds: 10}
drain: {gracePeriodSeconds: 60, marginSeconds: 10}
schedule: {cron: "0 3 * * 1-5", refresh: on-change, repeatedFire: skip}
metrics: {pushIntervalSeconds: 5}
retention: {runs: 50, days: 7, forgetMissingAfterDays: 3}
log: {level: debug, format: pretty}
`);
    fs.writeFileSync(path.join(dir.root, 'h.mjs'), 'export default async () => {};\n');
    const c = loadConfig(file);
    expect(c.source).toStrictEqual({ directory: dir.queue, include: ['a/**', '*.txt'], exclude: ['**/*.tmp'] });
    expect(c.handler).toStrictEqual({
      module: path.join(dir.root, 'h.mjs'),
      timeoutSeconds: 12.5,
      killAfterSeconds: 0,
      maxLogBytes: 100,
      expectOutput: true,
      env: { MODE: 'fast' },
    });
    expect(c.state).toStrictEqual({ postgres: 'postgres://u:pw@db:5432/cs' });
    expect([c.concurrency, c.queueSize]).toStrictEqual([3, 7]);
    expect(c.lease).toStrictEqual({ seconds: 15, renewSeconds: 5 });
    expect(c.retry).toStrictEqual({ maxAttempts: 2, backoffSeconds: 0, backoffMaxSeconds: 10 });
    expect(c.drain).toStrictEqual({ gracePeriodSeconds: 60, marginSeconds: 10 });
    // With postgres there is no db file to sit next to: the lock goes under <config dir>/.cronsafe.
    expect(c.lock).toStrictEqual({ path: path.join(dir.root, '.cronsafe', 'x1.lock'), allowNetworkFilesystem: true });
    expect(c.schedule).toStrictEqual({ cron: '0 3 * * 1-5', refresh: 'on-change', repeatedFire: 'skip' });
    expect(c.metrics).toStrictEqual({ pushIntervalSeconds: 5 });
    expect(c.retention).toStrictEqual({ runs: 50, days: 7, forgetMissingAfterDays: 3 });
    expect(c.log).toStrictEqual({ level: 'debug', format: 'pretty' });
  });

  it('applies every default to a minimal file', () => {
    const file = minimal();
    expect(loadConfig(file)).toStrictEqual({
      name: 'job',
      configPath: file,
      source: { directory: dir.queue, include: ['**'], exclude: [] },
      handler: { command: ['echo', '{path}'], timeoutSeconds: 300, killAfterSeconds: 5, maxLogBytes: 65536, expectOutput: false, env: {} },
      state: { sqlite: path.join(dir.root, '.cronsafe', 'job.db'), defaulted: true, allowNetworkFilesystem: false },
      concurrency: DEFAULT_CONCURRENCY,
      queueSize: 4 * DEFAULT_CONCURRENCY,
      lease: { seconds: 90, renewSeconds: 30 },
      retry: { maxAttempts: 5, backoffSeconds: 30, backoffMaxSeconds: 3600 },
      drain: { gracePeriodSeconds: 30, marginSeconds: 5 },
      lock: { path: path.join(dir.root, '.cronsafe', 'job.lock'), allowNetworkFilesystem: false },
      daemon: { tickSeconds: 30, growth: { enabled: false, cooldownSeconds: 300, maxIncompletePasses: 3 } },
      retention: { runs: 1000, days: 30, forgetMissingAfterDays: 30 },
      log: { level: 'info', format: 'json' },
    } satisfies Config);
  });

  it('derives queueSize from an explicit concurrency', () => {
    expect(loadConfig(minimal('concurrency: 3\n')).queueSize).toBe(12);
  });

  it('resolves relative paths against the config file directory, not the cwd', () => {
    fs.mkdirSync(path.join(dir.root, 'conf', 'q'), { recursive: true });
    fs.writeFileSync(path.join(dir.root, 'conf', 'h.js'), '');
    const file = write(
      'name: rel\nsource: {directory: q}\nhandler: {module: ./h.js}\noutput: {directory: ../out}\n' +
        'state: {sqlite: state/ledger.db}\n',
      'conf/cronsafe.yaml',
    );
    const c = loadConfig(file);
    expect(c.source.directory).toBe(path.join(dir.root, 'conf', 'q'));
    expect(c.handler.module).toBe(path.join(dir.root, 'conf', 'h.js'));
    expect(c.output).toStrictEqual({ directory: path.join(dir.root, 'out') });
    expect(c.state.sqlite).toBe(path.join(dir.root, 'conf', 'state', 'ledger.db'));
    // Default lock: next to the sqlite db, named after the job.
    expect(c.lock.path).toBe(path.join(dir.root, 'conf', 'state', 'rel.lock'));
    const withLock = write(`name: rel\nsource: {directory: q}\nhandler: {module: ./h.js}\nlock: {path: l/x.lock}\n`, 'conf/b.yaml');
    expect(loadConfig(withLock).lock.path).toBe(path.join(dir.root, 'conf', 'l', 'x.lock'));
  });

  it('accepts a missing output.directory (created later) and skips path checks on request', () => {
    expect(loadConfig(minimal(`output: {directory: ${dir.root}/not-yet}\n`)).output?.directory).toBe(`${dir.root}/not-yet`);
    const file = write('name: job\nsource: {directory: /does/not/exist}\nhandler: {module: /nope.js}\n');
    expect(loadConfig(file, { checkPaths: false }).source.directory).toBe('/does/not/exist');
  });
});

describe('loadConfig: globs', () => {
  it.each(['source.include', 'source.exclude'])('%s refuses a leading "!" (it negates the whole glob, not an exception to the others)', (key) => {
    const list = key === 'source.include' ? `include: ["*.txt", "!bad.txt"]` : `exclude: ["!keep.txt"]`;
    const file = write(`name: job\nsource: {directory: queue, ${list}}\nhandler: {command: [echo]}\n`);
    const err = configError(() => loadConfig(file));
    expect(err.message).toContain(`${key}[${key === 'source.include' ? 1 : 0}]: expected a glob without a leading "!"`);
    expect(err.message).toContain('source.exclude');
  });
});

describe('loadConfig: globs ending in "/"', () => {
  it.each(['source.include', 'source.exclude'])('%s refuses them: they match no item (an exclude ["tmp/"] left tmp/ in the scan)', (key) => {
    const list = key === 'source.include' ? `include: ["*.txt", "incoming/"]` : `exclude: ["tmp/"]`;
    const file = write(`name: job\nsource: {directory: queue, ${list}}\nhandler: {command: [echo]}\n`);
    const err = configError(() => loadConfig(file));
    expect(err.message).toContain(`${key}[${key === 'source.include' ? 1 : 0}]: expected a glob that can match a file: one ending in "/" matches none`);
  });
});

describe('loadConfig: globs ending in a lone backslash', () => {
  it.each(['source.include', 'source.exclude'])('%s refuses them: the backslash escapes nothing and the glob names no item (an exclude of tmp plus a backslash left tmp/ in the scan)', (key) => {
    const list = key === 'source.include' ? `include: ["*.txt", 'incoming\\']` : `exclude: ['tmp\\']`;
    const file = write(`name: job\nsource: {directory: queue, ${list}}\nhandler: {command: [echo]}\n`);
    const err = configError(() => loadConfig(file));
    expect(err.message).toContain(`${key}[${key === 'source.include' ? 1 : 0}]: expected a glob that can match an item: one ending in a lone "\\" escapes nothing`);
    // Only that: not also "expected a glob the scan can compile: Unterminated group", a
    // group the glob does not have, sending the user to look for one.
    expect(err.message.split('\n')).toHaveLength(1);
    expect(err.message).not.toContain('compile');
  });
  it('takes one ending in an escaped backslash (`\\\\`, a name ending in a backslash)', () => {
    const file = write(`name: job\nsource: {directory: queue, exclude: ['tmp\\\\', 'a\\\\\\*']}\nhandler: {command: [echo]}\n`);
    expect(loadConfig(file, { checkPaths: false }).source.exclude).toEqual(['tmp\\\\', 'a\\\\\\*']);
  });
});

describe('loadConfig: globs with a leading "!" that is no negation', () => {
  it.each(['source.include', 'source.exclude'])('%s takes an extglob "!(...)" (everything but; picomatch does not negate it)', (key) => {
    const list = key === 'source.include' ? `include: ["!(*.tmp)"]` : `exclude: ["!(*.scc)"]`;
    const file = write(`name: job\nsource: {directory: queue, ${list}}\nhandler: {command: [echo]}\n`);
    const config = loadConfig(file, { checkPaths: false });
    expect(key === 'source.include' ? config.source.include : config.source.exclude).toEqual([key === 'source.include' ? '!(*.tmp)' : '!(*.scc)']);
  });
});

describe('loadConfig: schedule.graceSeconds 0', () => {
  // Every fire comes some seconds after its occurrence: with 0, every run was refused as a
  // stale fire and exited 0, silently, forever.
  it('is a problem naming the key (leave it out for no grace window)', () => {
    const file = write(`name: job\nsource: {directory: queue}\nhandler: {command: [echo]}\nschedule: {cron: "0 * * * *", graceSeconds: 0}\n`);
    expectProblem(file, 'schedule.graceSeconds', 'expected a number of seconds > 0 (0 would refuse every fire as stale; leave the key out for no grace window), got 0');
  });
});

describe('loadConfig: a schedule that never fires', () => {
  it('schedule.cron "0 0 30 2 *" (Kubernetes takes it, and never starts the job) is a problem naming the key', () => {
    const file = write(`name: job\nsource: {directory: queue}\nhandler: {command: [echo]}\nschedule: {cron: "0 0 30 2 *"}\n`);
    expectProblem(file, 'schedule.cron', 'cron expression "0 0 30 2 *": never fires (no month it allows has a day of month it allows)');
  });
});

describe('loadConfig: paths on disk', () => {
  it('source.directory must exist and be a directory', () => {
    const gone = path.join(dir.root, 'gone');
    const file = write(`name: job\nsource: {directory: gone}\nhandler: {command: [echo]}\n`);
    expectProblem(file, 'source.directory', `directory not found: ${gone}`);
    fs.writeFileSync(gone, '');
    expectProblem(file, 'source.directory', `not a directory: ${gone}`);
  });

  it('source.directory must be readable', () => {
    const locked = path.join(dir.root, 'locked');
    fs.mkdirSync(locked, { mode: 0o000 });
    fs.chmodSync(locked, 0o000);
    fs.chmodSync(dir.root, 0o755);
    const file = write(`name: job\nsource: {directory: locked}\nhandler: {command: [echo]}\n`);
    fs.chmodSync(file, 0o644);
    let result: { message?: string; key?: string };
    if (process.getuid?.() === 0) {
      // dir.root reads anything: load as "nobody" in a child so the permission check is real.
      const script = `import { loadConfig } from ${JSON.stringify(pathToFileURL(LOAD_TS).href)};
        try { loadConfig(${JSON.stringify(file)}); console.log('{}'); }
        catch (e) { console.log(JSON.stringify({ message: e.message, key: e.key })); }`;
      const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        uid: 65534, gid: 65534, encoding: 'utf8', timeout: 30_000, cwd: path.dirname(LOAD_TS),
      });
      expect(child.status, child.stderr).toBe(0);
      result = JSON.parse(child.stdout) as typeof result;
    } else {
      const err = configError(() => loadConfig(file));
      result = { message: err.message, key: err.key };
    }
    fs.chmodSync(locked, 0o755);
    expect(result).toStrictEqual({
      message: `${file}: source.directory: directory not readable (EACCES): ${locked}`,
      key: 'source.directory',
    });
  });

  it('handler.module must exist; an existing output.directory must be a directory', () => {
    const mod = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {module: ./missing.js}\n`);
    expectProblem(mod, 'handler.module', `file not found: ${path.join(dir.root, 'missing.js')}`);
    fs.writeFileSync(path.join(dir.root, 'out'), '');
    expectProblem(minimal('output: {directory: out}\n'), 'output.directory', `not a directory: ${path.join(dir.root, 'out')}`);
  });
});

describe('environment', () => {
  const pgFile = () => minimal('state: {postgres: "${PGURL}"}\n');

  it('interpolates ${VAR} and fails naming the key when it is unset', () => {
    expect(loadConfig(pgFile(), { env: { PGURL: 'postgres://u:p@h/db' } }).state).toStrictEqual({ postgres: 'postgres://u:p@h/db' });
    expectProblem(pgFile(), 'state.postgres', 'environment variable PGURL is not set');
  });

  it('uses ${VAR:-default} when unset or empty, and keeps $${ literal', () => {
    const file = minimal('log: {level: "${LEVEL:-warn}"}\nlock: {path: "/l/${SUFFIX:-}x-$${NOT}.lock"}\n');
    expect(loadConfig(file, { env: {} }).log.level).toBe('warn');
    expect(loadConfig(file, { env: { LEVEL: '' } }).log.level).toBe('warn');
    expect(loadConfig(file, { env: { LEVEL: 'error' } }).log.level).toBe('error');
    expect(loadConfig(file, { env: { SUFFIX: 'a' } }).lock.path).toBe('/l/ax-${NOT}.lock');
  });

  it('turns a whole ${...} into a number only where a number is expected', () => {
    const file = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [echo], env: {TOKEN: "\${T}"}}\nconcurrency: \${N:-4}\n`);
    const c = loadConfig(file, { env: { T: '0123' } });
    expect([c.concurrency, c.handler.env]).toStrictEqual([4, { TOKEN: '0123' }]);
    expectProblem(file, 'concurrency', 'expected an integer from 1 to 1024, got "many"', { T: 'x', N: 'many' });
  });

  // `expectOutput: ${EXPECT}` with EXPECT=true was refused as `expected true or false, got "true"`.
  it('turns a whole ${...} into a boolean only where a boolean is expected', () => {
    const out = path.join(dir.root, 'outputs');
    fs.mkdirSync(out, { recursive: true });
    const file = write(`name: job\nsource: {directory: ${dir.queue}}\noutput: {directory: ${out}}\nhandler: {command: [echo], expectOutput: "\${E:-false}", env: {FLAG: "\${F}"}}\n`);
    for (const [e, want] of [['true', true], ['TRUE', true], ['True', true], ['false', false], ['', false]] as const) {
      const c = loadConfig(file, { env: { E: e, F: 'true' } });
      expect([c.handler.expectOutput, c.handler.env]).toStrictEqual([want, { FLAG: 'true' }]);
    }
    expectProblem(file, 'handler.expectOutput', 'expected true or false, got "yes"', { E: 'yes', F: 'x' });
    // Only a whole reference: text around it keeps it a string.
    const partial = write(`name: job\nsource: {directory: ${dir.queue}}\noutput: {directory: ${out}}\nhandler: {command: [echo], expectOutput: "\${E} "}\n`);
    expectProblem(partial, 'handler.expectOutput', 'expected true or false, got "true "', { E: 'true' });
  });

  // `concurrency: ${N}0` (no quotes) with N=2 said `got "20" (in quotes, so a string: remove
  // the quotes)`: there were none to remove, and removing them changes nothing.
  it('a number or boolean made by ${...} with text around it is not said to be in quotes', () => {
    const hint = (what: string) => `(made by \${...} with text around it, so a string: a value becomes ${what} only when it is exactly one \${NAME} or \${NAME:-default})`;
    const n = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [echo]}\nconcurrency: \${N}0\n`);
    expectProblem(n, 'concurrency', `expected an integer from 1 to 1024, got "20" ${hint('a number')}`, { N: '2' });
    const quoted = minimal('lease: {seconds: "${S}.5"}\n');
    expectProblem(quoted, 'lease.seconds', `expected a number of seconds > 0 and <= 2147483, got "90.5" ${hint('a number')}`, { S: '90' });
    const flag = minimal('lock: {allowNetworkFilesystem: "${A}${B}"}\n');
    expectProblem(flag, 'lock.allowNetworkFilesystem', `expected true or false, got "true" ${hint('true or false')}`, { A: 'tr', B: 'ue' });
    // Written in quotes, with no ${...}: the quotes are what made it a string.
    expectProblem(minimal('concurrency: "20"\n'), 'concurrency', 'expected an integer from 1 to 1024, got "20" (in quotes, so a string: remove the quotes)');
  });

  // `concurrency: 0x10` is 16 in the file (YAML 1.2): from a variable it was refused, with
  // "remove the quotes" said of a value written without any.
  it('a whole ${...} holding a YAML 1.2 hex or octal number is that number, as written in the file', () => {
    const file = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [echo]}\nconcurrency: \${N}\n`);
    expect(loadConfig(file, { env: { N: '0x10' } }).concurrency).toBe(16);
    expect(loadConfig(file, { env: { N: '0o17' } }).concurrency).toBe(15);
    expect(loadConfig(write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [echo]}\nconcurrency: 0x10\n`), { env: {} }).concurrency).toBe(16);
  });

  it('expands nested defaults, lazily, and names the key of a malformed or runaway one', () => {
    const file = minimal('lock: {path: "/l/${A:-${B:-${C:-c}}}-${D:-$${x}}.lock"}\n');
    expect(loadConfig(file, { env: {} }).lock.path).toBe('/l/c-${x}.lock');
    expect(loadConfig(file, { env: { B: 'b' } }).lock.path).toBe('/l/b-${x}.lock');
    expect(loadConfig(file, { env: { A: 'a', D: 'd' } }).lock.path).toBe('/l/a-d.lock');
    // An unset variable in a default that is not used is no error (as in a shell).
    const lazy = minimal('lock: {path: "/l/${A:-${UNSET}}.lock"}\n');
    expect(loadConfig(lazy, { env: { A: 'a' } }).lock.path).toBe('/l/a.lock');
    expectProblem(lazy, 'lock.path', 'environment variable UNSET is not set', {});
    // A whole nested reference still becomes a number where one is expected.
    const n = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [echo]}\nconcurrency: \${N:-\${M:-3}}\n`);
    expect(loadConfig(n, { env: {} }).concurrency).toBe(3);
    expect(loadConfig(n, { env: { M: '5' } }).concurrency).toBe(5);
    expectProblem(minimal('lock: {path: "/x/${A:-${B:-y}"}\n'), 'lock.path', 'invalid interpolation "${A:-${B:-y}": no closing } (use ${NAME} or ${NAME:-default}; write $${ for a literal ${)');
    expectProblem(minimal('lock: {path: "/x/${A:-${1B}}"}\n'), 'lock.path', 'invalid interpolation "${1B}" (use ${NAME} or ${NAME:-default}; write $${ for a literal ${)');
    const deep = `${'${A:-'.repeat(9)}x${'}'.repeat(9)}`;
    expectProblem(minimal(`lock: {path: "${deep}"}\n`), 'lock.path', 'defaults nested more than 8 levels deep');
  });

  it('rejects malformed interpolation', () => {
    expectProblem(minimal('lock: {path: "/x/${1BAD}"}\n'), 'lock.path',
      'invalid interpolation "${1BAD}" (use ${NAME} or ${NAME:-default}; write $${ for a literal ${)');
  });

  it('CRONSAFE_STATE_POSTGRES overrides state, and the lock moves under .cronsafe', () => {
    const file = minimal('state: {sqlite: s.db}\n');
    const c = loadConfig(file, { env: { CRONSAFE_STATE_POSTGRES: 'postgresql://a:b@pg/cs' } });
    expect(c.state).toStrictEqual({ postgres: 'postgresql://a:b@pg/cs' });
    expect(c.lock.path).toBe(path.join(dir.root, '.cronsafe', 'job.lock'));
    expect(loadConfig(file, { env: { CRONSAFE_STATE_POSTGRES: '' } }).state).toStrictEqual({ sqlite: path.join(dir.root, 's.db'), allowNetworkFilesystem: false });
    expectProblem(file, 'state.postgres', 'expected a postgres:// or postgresql:// URL, got 8 characters with no "://" (not shown: it may be a password) (from the environment variable CRONSAFE_STATE_POSTGRES)', {
      CRONSAFE_STATE_POSTGRES: 'nonsense',
    });
  });

  it('CRONSAFE_STATE_POSTGRES does not hide a state that is not a mapping (refused without the variable, as validate in CI runs)', () => {
    const pg = { CRONSAFE_STATE_POSTGRES: 'postgresql://a:b@pg/cs' };
    expectProblem(minimal('state: garbage\n'), 'state', 'expected a mapping, got "garbage"', pg);
    expectProblem(minimal('state: [1]\n'), 'state', 'expected a mapping, got a list', pg);
    expect(loadConfig(minimal(), { env: pg }).state).toStrictEqual({ postgres: 'postgresql://a:b@pg/cs' });
    expect(loadConfig(minimal('state: {schema: etl}\n'), { env: pg }).state).toStrictEqual({ postgres: 'postgresql://a:b@pg/cs', schema: 'etl' });
  });

  it('state.postgres: an sslmode neither libpq nor the pg driver knows is refused (pg took it for verify-full)', () => {
    // MySQL's spelling, a typo, a capital: the driver required TLS with a verified certificate,
    // and against a server without TLS the run failed (exit 1) with "The server does not
    // support SSL connections", for a URL that said to turn TLS off.
    const file = minimal('');
    for (const mode of ['DISABLED', 'disabled', 'Disable', 'off']) {
      expectProblem(
        file,
        'state.postgres',
        `expected sslmode to be one of disable, allow, prefer, require, verify-ca, verify-full, no-verify, got ${JSON.stringify(mode)} (from the environment variable CRONSAFE_STATE_POSTGRES)`,
        { CRONSAFE_STATE_POSTGRES: `postgres://app:s3cret@db/cs?application_name=x&sslmode=${mode}` },
      );
    }
    // The driver reads the last of two; either may be the typo.
    expectProblem(
      file,
      'state.postgres',
      'expected sslmode to be one of disable, allow, prefer, require, verify-ca, verify-full, no-verify, got "disabled" (from the environment variable CRONSAFE_STATE_POSTGRES)',
      { CRONSAFE_STATE_POSTGRES: 'postgres://app@db/cs?sslmode=disabled&sslmode=disable' },
    );
    for (const mode of ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full', 'no-verify', '']) {
      const url = `postgresql://app:s3cret@db/cs?sslmode=${mode}`;
      expect(loadConfig(file, { env: { CRONSAFE_STATE_POSTGRES: url } }).state.postgres).toBe(url);
    }
    expect(loadConfig(file, { env: { CRONSAFE_STATE_POSTGRES: 'postgres://app@/cs?host=/run/pg&sslmode=disable' } }).state.postgres).toContain('host=/run/pg');
  });

  it('state.postgres: a URL refused for a raw "/", "?", "#" or "@" in its password says to percent-encode them', () => {
    // The refused URL is shown with its password redacted, so it looked well-formed: the
    // message said "expected a postgres:// URL, got "postgres://app:***@db/cs"" and no more.
    const file = minimal('');
    const hint = 'expected a postgres:// or postgresql:// URL, with "/", "?", "#" and "@" in its user name and password percent-encoded (%2F, %3F, %23, %40)';
    for (const url of ['postgres://app:Hunter2/Secret@db/cs', 'postgres://app:Hun#ter2@db/cs', 'postgresql://app:Hun?ter2@db/cs', 'postgres://app:Hun@ter2/Secret@db/cs']) {
      expectProblem(file, 'state.postgres', `${hint}, got "${url.slice(0, url.indexOf(':', 11))}:***@db/cs" (from the environment variable CRONSAFE_STATE_POSTGRES)`, {
        CRONSAFE_STATE_POSTGRES: url,
      });
    }
    expect(loadConfig(file, { env: { CRONSAFE_STATE_POSTGRES: 'postgres://app:Hunter2%2FSecret@db/cs' } }).state.postgres).toBe('postgres://app:Hunter2%2FSecret@db/cs');
  });

  it('resolveConfigPath: -c, then $CRONSAFE_CONFIG, then ./cronsafe.yaml, always absolute', () => {
    expect(resolveConfigPath('a/b.yaml', { CRONSAFE_CONFIG: '/env.yaml' })).toBe(path.resolve('a/b.yaml'));
    expect(resolveConfigPath(undefined, { CRONSAFE_CONFIG: 'env.yaml' })).toBe(path.resolve('env.yaml'));
    expect(resolveConfigPath(undefined, {})).toBe(path.join(process.cwd(), 'cronsafe.yaml'));
  });
});

describe('secrets', () => {
  it('redactUrl hides the password and nothing else', () => {
    expect(redactUrl('postgres://app:s3cret@db:5432/cs?sslmode=require')).toBe('postgres://app:***@db:5432/cs?sslmode=require');
    expect(redactUrl('postgres://app:p@ss@db/cs')).toBe('postgres://app:***@db/cs');
    expect(redactUrl('postgres://db/cs?user=a&password=s3cret&x=1')).toBe('postgres://db/cs?user=a&password=***&x=1');
    expect(redactUrl('postgres://app@db/cs')).toBe('postgres://app@db/cs');
    expect(redactUrl('http://pushgateway:9091')).toBe('http://pushgateway:9091');
    expect(redactUrl('not a url')).toBe('not a url');
  });

  it('redactUrl hides the query parameters that may hold a secret (a push gateway behind a proxy), and keeps the others', () => {
    expect(redactUrl('http://h:9091/?password=hunter2&token=hunter3&job=x')).toBe('http://h:9091/?password=***&token=***&job=x');
    expect(redactUrl('https://h/p?api_key=k1&X-Amz-Signature=s1&access_token=t1&authorization=a1')).toBe('https://h/p?api_key=***&X-Amz-Signature=***&access_token=***&authorization=***');
    expect(redactUrl('postgres://db/cs?sslmode=require&application_name=cronsafe')).toBe('postgres://db/cs?sslmode=require&application_name=cronsafe');
  });

  it('redactUrl and urlSecrets take an http(s) URL\'s user without a password for a token (https://TOKEN@gateway); a database URL\'s user is kept', () => {
    expect(redactUrl('https://ghp_t0ken42@gw.example:9091/pgw')).toBe('https://***@gw.example:9091/pgw');
    expect(redactUrl('HTTP://t0ken42@gw:9091')).toBe('HTTP://***@gw:9091');
    expect(redactUrl('postgres://app@db/cs')).toBe('postgres://app@db/cs');
    expect(urlSecrets('https://t%30ken42abcdef@gw:9091')).toEqual(expect.arrayContaining(['t%30ken42abcdef', 't0ken42abcdef']));
    // A password from ${VAR}, not percent-encoded: its '%' as itself, its blank and '=' (which the URL parser encoded) decoded, as the push sends it.
    expect(urlSecrets('https://u:50%off; x=1@gw:9091')).toContain('50%off; x=1');
    expect(urlSecrets('postgres://app@db/cs').filter((s) => s !== '')).toEqual([]);
    expect(urlSecrets('https://user:pw1234@gw:9091')).not.toContain('user');
    // A plain name given alone is shown as *** in the config, but not scrubbed from every handler line.
    expect(urlSecrets('https://cronsafe@gw:9091').filter((s) => s !== '')).toEqual([]);
    expect(redactUrl('https://cronsafe@gw:9091')).toBe('https://***@gw:9091');
  });

  it('an http(s) URL\'s user with an empty password (https://TOKEN:@gateway, curl -u TOKEN:) is a token too: validate and run started do not show it', () => {
    expect(redactUrl('https://ghp_t0ken42abcdef:@gw.example:9091/pgw')).toBe('https://***:@gw.example:9091/pgw');
    expect(redactUrl('postgres://app:@db/cs')).toBe('postgres://app:***@db/cs');
    expect(urlSecrets('https://ghp_t0ken42abcdef:@gw:9091')).toContain('ghp_t0ken42abcdef');
    const file = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [curl, "https://ghp_t0ken42abcdef:@gw.example:9091"]}\nmetrics: {pushgateway: "https://ghp_t0ken42abcdef:@gw.example:9091"}\n`);
    const summary = configSummary(loadConfig(file));
    expect(JSON.stringify(summary)).not.toContain('t0ken42');
    expect(summary.metrics).toStrictEqual({ pushgateway: 'https://***:@gw.example:9091', pushIntervalSeconds: 30 });
  });

  it('metrics.pushgateway with a query string (a ?token= the push would drop, failing every push) is a problem naming the key, without the token', () => {
    for (const url of ['http://pg:9091/?token=hunter2', 'https://pg:9091/gw#hunter2']) {
      const file = write(`name: job\nsource: {directory: queue}\nhandler: {command: [echo]}\nmetrics: {pushgateway: "${url}"}\n`);
      expectProblem(file, 'metrics.pushgateway', 'expected a URL without a query string or fragment: the push does not send them (credentials go in user:password@)');
    }
  });

  it('metrics.pushgateway with the push path (…/metrics/job/x, as the Pushgateway documents it) is a problem naming the key: every push went to …/metrics/job/x/metrics/job/<name> and was refused', () => {
    for (const url of ['http://pushgateway:9091/metrics/job/captions', 'https://u:pw@gw.example/pgw/metrics/job/captions/instance/a', 'http://gw:9091/metrics/job/']) {
      const file = write(`name: job\nsource: {directory: queue}\nhandler: {command: [echo]}\nmetrics: {pushgateway: "${url}"}\n`);
      expectProblem(
        file,
        'metrics.pushgateway',
        "expected the Pushgateway's base URL (http://host:9091, or the route prefix it is served under), without /metrics/job/...: cronsafe adds /metrics/job/<name> itself",
      );
    }
    // A route prefix is the gateway's base URL; a path that merely contains the words is too.
    for (const url of ['http://gw:9091/pgw', 'http://gw:9091/metrics-gw/', 'http://gw:9091/jobmetrics/job']) {
      const file = minimal(`metrics: {pushgateway: "${url}"}\n`);
      expect(loadConfig(file).metrics?.pushgateway).toBe(url);
    }
  });

  it('redactUrl hides the password of what users write instead of a URL: libpq keywords, raw "#" or "/", one slash, blanks in front', () => {
    expect(redactUrl("host=db user=app password=s3cret dbname=cs")).toBe('host=db user=app password=*** dbname=cs');
    expect(redactUrl("host=db password = 'se cret' dbname=cs")).toBe('host=db password = *** dbname=cs');
    expect(redactUrl('postgres://app:s3#cret@db:5432/cs')).toBe('postgres://app:***@db:5432/cs');
    expect(redactUrl('postgres://app:s3/c?ret@db/cs?password=x')).toBe('postgres://app:***@db/cs?password=***');
    expect(redactUrl('postgres:/app:s3cret@db/cs')).toBe('postgres:/app:***@db/cs');
    expect(redactUrl('\tpostgres://app:s3cret@db/cs')).toBe('\tpostgres://app:***@db/cs');
    // No URL at all: the scheme left out or mistyped, the URL in quotes (as a Secret may hold it).
    expect(redactUrl('app:s3cret@db:5432/cs')).toBe('app:***@db:5432/cs');
    expect(redactUrl('//app:s3cret@db/cs')).toBe('//app:***@db/cs');
    expect(redactUrl('postgres//app:s3cret@db/cs')).toBe('postgres//app:***@db/cs');
    expect(redactUrl('"postgres://app:s3cret@db/cs"')).toBe('"postgres://app:***@db/cs"');
    // A raw '@' in a query parameter's value is a legal URL (libpq's application_name, a
    // certificate path): kept whole, and state.postgres takes it.
    for (const url of ['postgres://app:s3cret@db/cs?application_name=etl@prod', 'postgres://app:s3cret@db/cs?sslrootcert=/etc/team@x/ca.pem']) {
      expect(redactUrl(url)).toBe(url.replace('s3cret', '***'));
      expect(loadConfig(minimal(`state: {postgres: "${url}"}\n`)).state).toStrictEqual({ postgres: url });
    }
    // Not secrets: handler arguments stay as they are.
    for (const arg of ['{path}', '/bin/cp', 's3://bucket/a@b', 'http://h/x?mail=a@b', '--retries=3']) expect(redactUrl(arg)).toBe(arg);
  });

  it('a bad interpolation in a value that may hold a secret does not quote it (handler.env, state.postgres, metrics.pushgateway)', () => {
    // A password written with a "${" in it was shown from there on: "${x9!Qz".
    const usage = '(use ${NAME} or ${NAME:-default}; write $${ for a literal ${)';
    const env = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [echo], env: {TOKEN: "Ab\${x9!Qz"}}\n`, 'env.yaml');
    expectProblem(env, 'handler.env.TOKEN', `invalid interpolation at character 3 (not shown: the value may hold a secret) ${usage}`);
    expectProblem(minimal('state: {postgres: "postgres://u:Zq${w7!Lp@db/x"}\n'), 'state.postgres', `invalid interpolation at character 16 (not shown: the value may hold a secret) ${usage}`);
    expectProblem(minimal('state: {postgres: "postgres://u:${PW:-Zq@db/x"}\n'), 'state.postgres', `invalid interpolation at character 14 (not shown: the value may hold a secret): no closing } ${usage}`);
    expectProblem(minimal('metrics: {pushgateway: "http://u:Zq${-Lp}@pg:9091"}\n'), 'metrics.pushgateway', `invalid interpolation at character 12 (not shown: the value may hold a secret) ${usage}`);
    // Other keys still quote what is wrong.
    expectProblem(minimal('lock: {path: "/x/${1BAD}"}\n'), 'lock.path', `invalid interpolation "\${1BAD}" ${usage}`);
  });

  it('configSummary shows no piece of a known secret in a handler argument, whatever its characters', () => {
    // The ledger's password, with a ':' before an '@', passed to the handler as well. It was
    // shown as "--db-password=Zx:***@kq!w9": redactUrl took it for a user and password first.
    const file = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [sh, "--db-password=Zx:4@kq!w9", "Zx:4@kq!w9"]}
state: {postgres: "postgres://app:Zx%3A4%40kq!w9@db/cs"}\n`);
    const summary = configSummary(loadConfig(file));
    expect(summary.handler).toMatchObject({ command: ['sh', '--db-password=***', '***'] });
    expect(JSON.stringify(summary)).not.toMatch(/Zx|kq|w9/);
  });

  it('configSummary shows no secret', () => {
    const file = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [echo, "{path}"], env: {API_TOKEN: tok-123}}
state: {postgres: "postgres://app:s3cret@db/cs"}\nmetrics: {pushgateway: "https://u:pushpw@pg:9091"}\n`);
    const summary = configSummary(loadConfig(file));
    const json = JSON.stringify(summary);
    for (const secret of ['s3cret', 'pushpw', 'tok-123']) expect(json).not.toContain(secret);
    expect(summary.state).toStrictEqual({ postgres: 'postgres://app:***@db/cs' });
    expect(summary.handler).toMatchObject({ command: ['echo', '{path}'], envKeys: ['API_TOKEN'] });
    expect(summary.metrics).toStrictEqual({ pushgateway: 'https://u:***@pg:9091', pushIntervalSeconds: 30 });
    expect(summary.name).toBe('job');
  });
  it('configSummary (what validate prints) shows the daemon block of a scheduled job, as the daemon runs it', () => {
    const scheduled = configSummary(loadConfig(minimal('schedule: {cron: "*/5 * * * *"}\ndaemon: {tickSeconds: 5, growth: {enabled: true}}\n')));
    expect(scheduled.daemon).toStrictEqual({ tickSeconds: 5, growth: { enabled: true, cooldownSeconds: 300, maxIncompletePasses: 3 } });
    // Without a schedule there is no daemon to run.
    expect(configSummary(loadConfig(minimal())).daemon).toBeUndefined();
  });
});

// cronsafe sets these for each attempt, over handler.env: given there, they were accepted and
// never seen by the handler; CRONSAFE_OUTPUT_PATH without output.directory was not set at all.
describe('loadConfig: handler.env naming a variable cronsafe sets per attempt', () => {
  it.each([
    ['CRONSAFE_ITEM_PATH', "the item's absolute path, {path}"],
    ['CRONSAFE_ITEM_ID', "the item's id, {id}"],
    ['CRONSAFE_OUTPUT_PATH', "the attempt's output temp path, {output}, set only with output.directory"],
    ['CRONSAFE_ATTEMPT', 'the attempt number, {attempt}'],
  ])('%s is refused, naming its key', (name, what) => {
    const file = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [echo], env: {${name}: /data/out/x, OTHER: y}}\n`);
    expectProblem(file, `handler.env.${name}`, `cannot be set: cronsafe sets it for each attempt (${what}), whatever handler.env says; use another name`);
  });

  it('other CRONSAFE_ names are passed on', () => {
    const file = write(`name: job\nsource: {directory: ${dir.queue}}\nhandler: {command: [echo], env: {CRONSAFE_ITEM_DIR: /x, CRONSAFE_STATE_POSTGRES: "postgres://u@db/x"}}\n`);
    expect(Object.keys(loadConfig(file, { env: {} }).handler.env)).toStrictEqual(['CRONSAFE_ITEM_DIR', 'CRONSAFE_STATE_POSTGRES']);
  });
});
