/**
 * Loading a config file: find it, parse the YAML, interpolate the environment,
 * validate, apply defaults, make paths absolute, check the paths that must exist.
 * Every failure is one ConfigError (exit 78) naming the file and the key.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import YAML from 'yaml';
import { ConfigError, coerceError } from '../errors.js';
import { readJob } from '../ledger/sqlite/read-job.js';
import { scanSkipsDirectory } from '../runner/scan.js';
import { interpolate } from './interpolate.js';
import { programProblem } from './program.js';
import type { KeyProblem } from './messages.js';
import { describeValue, fallbackMessage, formatIssues, problemLine } from './messages.js';
import { redactUrl } from '../redact.js';
import { configSchema, knownKeysAt, schemaAt, type ParsedConfig } from './schema.js';
import type { Config } from './types.js';

export { redactUrl } from '../redact.js';

/** Overrides `state.postgres` (and drops `state.sqlite`) when set and non-empty. */
export const POSTGRES_ENV = 'CRONSAFE_STATE_POSTGRES';

/** Where the config is: `-c FILE`, else `$CRONSAFE_CONFIG`, else `./cronsafe.yaml`; always absolute. */
export function resolveConfigPath(cliPath?: string, env: NodeJS.ProcessEnv = process.env): string {
  const chosen = cliPath || env.CRONSAFE_CONFIG || 'cronsafe.yaml';
  return path.resolve(chosen);
}

/** Options for loadConfig(). */
export interface LoadOptions {
  /** Environment for `${VAR}` and CRONSAFE_STATE_POSTGRES. Default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Check that source.directory, handler.module and output.directory are usable. Default true. */
  checkPaths?: boolean;
}

/** More problems than this are summed up in one line: nobody reads the 100,000th. */
const MAX_PROBLEMS_SHOWN = 50;

function fail(file: string, problems: KeyProblem[]): never {
  const lines = problems.slice(0, MAX_PROBLEMS_SHOWN).map((p) => problemLine(file, p));
  if (problems.length > MAX_PROBLEMS_SHOWN) lines.push(`${file}: ... and ${problems.length - MAX_PROBLEMS_SHOWN} more problems`);
  throw new ConfigError(lines.join('\n'), path.resolve(file), problems[0]?.key);
}

/** A config is a page of YAML; past this it is a mistake (or /dev/zero), not a config. */
export const MAX_CONFIG_BYTES = 1024 * 1024;
/** How long a FIFO's writer may take to send the config. */
const FIFO_WAIT_MS = 10_000;

/**
 * At most MAX_CONFIG_BYTES + 1 bytes, whatever the file is: readFileSync would read a
 * FIFO or /dev/zero until the heap gives out, and a huge file into a huge parse.
 */
function readBounded(abs: string): { text: string; tooBig: boolean } {
  // A FIFO is opened without blocking: with no writer, a blocking open would hang the
  // process before any signal handler could run (only SIGKILL would end it). A writer may
  // still come (`mkfifo f; gen > f & cronsafe -c f`), so nothing read yet is waited for,
  // in short naps, up to FIFO_WAIT_MS; `-c <(generate-config)` is read to its end.
  const fifo = fs.statSync(abs, { throwIfNoEntry: false })?.isFIFO() === true;
  const fd = fs.openSync(abs, fifo ? fs.constants.O_RDONLY | fs.constants.O_NONBLOCK : 'r');
  try {
    const buf = Buffer.allocUnsafe(MAX_CONFIG_BYTES + 1);
    let n = 0;
    // Silence, not the whole read: a writer that sends a line a second is still waited for.
    let deadline = Date.now() + FIFO_WAIT_MS;
    while (n < buf.length) {
      let got: number;
      try {
        got = fs.readSync(fd, buf, n, buf.length - n, null);
      } catch (err) {
        // A FIFO's writer that has not written yet: wait a little, not for ever.
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
        got = -1;
      }
      // EAGAIN (a writer, no data yet), or end of file with nothing read (no writer yet).
      if (fifo && (got === -1 || (got === 0 && n === 0))) {
        if (Date.now() > deadline) throw new ConfigError(`config file ${abs} is a FIFO whose writer sent nothing (more) for ${FIFO_WAIT_MS / 1000} s`, abs);
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
        continue;
      }
      if (got <= 0) break;
      n += got;
      deadline = Date.now() + FIFO_WAIT_MS;
    }
    return { text: buf.toString('utf8', 0, Math.min(n, MAX_CONFIG_BYTES)), tooBig: n > MAX_CONFIG_BYTES };
  } finally {
    fs.closeSync(fd);
  }
}

function readYaml(file: string, abs: string): unknown {
  let text: string;
  try {
    const read = readBounded(abs);
    if (read.tooBig) {
      throw new ConfigError(`config file ${abs} is larger than the 1 MiB limit (${MAX_CONFIG_BYTES} bytes)`, abs);
    }
    text = read.text;
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new ConfigError(`config file not found: ${abs}`, abs);
    throw new ConfigError(`cannot read config file ${abs}: ${code ?? String(err)}`, abs);
  }
  // uniqueKeys off: the library compares every key with every other (quadratic: a 1 MiB
  // file of keys took minutes); duplicateKeyError does the same check with a Set.
  const lineCounter = new YAML.LineCounter();
  const doc = YAML.parseDocument(text, { prettyErrors: true, uniqueKeys: false, lineCounter });
  if (doc.errors.length === 0) {
    const dup = duplicateKeyOffset(doc);
    if (dup !== undefined) {
      const pos = lineCounter.linePos(dup);
      throw new ConfigError(`${file}:${pos.line}:${pos.col}: invalid YAML: Map keys must be unique`, abs);
    }
  }
  if (doc.errors.length > 0) {
    const lines = doc.errors.map((e) => {
      const pos = e.linePos?.[0];
      const where = pos ? `${file}:${pos.line}:${pos.col}` : file;
      const text =
        e.code === 'MULTIPLE_DOCS'
          ? 'expected one document, found a second one (remove the "---" line)'
          : e.message.replace(/ at line \d+, column \d+:[\s\S]*$/, '');
      return `${where}: invalid YAML: ${text}`;
    });
    throw new ConfigError(lines.join('\n'), abs);
  }
  try {
    // The alias cap stops a "billion laughs" file from expanding into gigabytes.
    return doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    throw new ConfigError(`${file}: invalid YAML: ${coerceError(err).message}`, abs);
  }
}

/** Offset of the first key that repeats one before it in the same mapping, if any (linear). */
function duplicateKeyOffset(doc: YAML.Document): number | undefined {
  let found: number | undefined;
  YAML.visit(doc, {
    Map(_key, map) {
      const seen = new Set<string>();
      for (const pair of map.items) {
        const k = pair.key;
        if (!YAML.isScalar(k)) continue;
        const name = String(k.value);
        if (seen.has(name)) {
          found = k.range?.[0] ?? 0;
          return YAML.visit.BREAK;
        }
        seen.add(name);
      }
      return undefined;
    },
  });
  return found;
}

/**
 * Load and validate a config file into the resolved Config.
 * @param file path of the YAML file; messages show it as given, relative paths in it
 *   resolve against its directory.
 * @throws ConfigError naming the file and (when there is one) the first offending key.
 */
export function loadConfig(file: string, opts: LoadOptions = {}): Config {
  const env = opts.env ?? process.env;
  const abs = path.resolve(file);
  const raw = readYaml(file, abs);

  if (raw === null || raw === undefined) {
    fail(file, [{ key: '', message: 'the file is empty; expected a mapping with at least name, source and handler' }]);
  }
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    fail(file, [{ key: '', message: `expected a mapping at the top level, got ${describeValue(raw)}` }]);
  }

  const interpolated = interpolate(raw, env, (p) => schemaAt(p)?.type === 'number');
  if (interpolated.problems.length > 0) fail(file, interpolated.problems);
  const value = interpolated.value as Record<string, unknown>;

  const pgOverride = env[POSTGRES_ENV];
  if (pgOverride) {
    // The environment picks the store: a Secret-provided URL must win over a sqlite
    // path left in a ConfigMap, not collide with it as "both set".
    const state = value.state && typeof value.state === 'object' ? { ...value.state } : {};
    delete (state as Record<string, unknown>).sqlite;
    value.state = { ...state, postgres: pgOverride };
  }

  const parsed = configSchema.safeParse(value, {
    reportInput: true,
    error: (iss) => fallbackMessage(iss as { code?: string; expected?: string }),
  });
  if (!parsed.success) fail(file, formatIssues(parsed.error.issues, knownKeysAt));

  const config = resolve(parsed.data, abs);
  checkState(file, config);
  if (opts.checkPaths ?? true) checkPaths(file, config);
  return config;
}

/**
 * The SQLite ledger's path: created on first use when missing, but an existing
 * non-file can never be opened (every command uses the ledger, so always checked).
 */
function checkState(file: string, c: Config): void {
  const db = c.state.sqlite;
  let s: fs.Stats | undefined;
  try {
    s = db === undefined ? undefined : fs.statSync(db, { throwIfNoEntry: false });
  } catch (err) {
    // A file where a directory of the path must be: no run could ever create the ledger.
    if ((err as NodeJS.ErrnoException).code === 'ENOTDIR') {
      fail(file, [{ key: 'state.sqlite', message: `a parent of the ledger file is not a directory: ${db}` }]);
    }
    return; // EACCES: the store's own problem, reported with its path when it is opened (exit 1)
  }
  if (db !== undefined && s && !s.isFile()) {
    fail(file, [{ key: 'state.sqlite', message: `${s.isDirectory() ? 'a directory' : 'not a regular file'}, expected the ledger file (e.g. ${path.join(db, `${c.name}.db`)}): ${db}` }]);
  }
}

/** Machine- and location-dependent defaults, absolute paths. */
function resolve(p: ParsedConfig, abs: string): Config {
  const dir = path.dirname(abs);
  const at = (x: string): string => path.resolve(dir, x);
  const stateDir = path.join(dir, '.cronsafe');
  const sqlite =
    p.state.postgres !== undefined ? undefined
    : p.state.sqlite !== undefined ? { file: at(p.state.sqlite) }
    : defaultSqlite(stateDir, p.name);
  const concurrency = p.concurrency ?? Math.min(8, 2 * os.availableParallelism());

  const config: Config = {
    name: p.name,
    configPath: abs,
    source: { directory: at(p.source.directory), include: p.source.include, exclude: p.source.exclude },
    handler: {
      ...(p.handler.command ? { command: p.handler.command } : {}),
      ...(p.handler.module ? { module: at(p.handler.module) } : {}),
      timeoutSeconds: p.handler.timeoutSeconds,
      killAfterSeconds: p.handler.killAfterSeconds,
      maxLogBytes: p.handler.maxLogBytes,
      expectOutput: p.handler.expectOutput,
      env: p.handler.env,
    },
    state:
      sqlite !== undefined
        ? { sqlite: sqlite.file, ...(sqlite.legacy ? { legacyDefault: true } : {}), allowNetworkFilesystem: p.state.allowNetworkFilesystem }
        : { postgres: p.state.postgres, ...(p.state.schema !== undefined ? { schema: p.state.schema } : {}) },
    concurrency,
    queueSize: p.queueSize ?? 4 * concurrency,
    lease: p.lease,
    retry: p.retry,
    drain: p.drain,
    lock: {
      path: at(p.lock.path ?? path.join(sqlite ? path.dirname(sqlite.file) : stateDir, `${p.name}.lock`)),
      allowNetworkFilesystem: p.lock.allowNetworkFilesystem,
      ...kubernetesLease(p),
    },
    daemon: p.daemon,
    retention: p.retention,
    log: p.log,
  };
  if (p.output) config.output = { directory: at(p.output.directory) };
  if (p.schedule) config.schedule = p.schedule;
  if (p.metrics) config.metrics = p.metrics;
  if (p.events) config.events = p.events;
  if (p.scheduledTimestamp) config.scheduledTimestamp = p.scheduledTimestamp;
  return config;
}

/** The ledger file every job used by default before ledgers were one per name. */
export const LEGACY_DEFAULT_SQLITE = 'cronsafe.db';

/**
 * The default ledger, `<config dir>/.cronsafe/<name>.db`: one per job, so two configs in
 * one directory never share one. Upgrades: while that file does not exist, the old shared
 * default `cronsafe.db` is kept when it records no job yet or this one (the run logs it);
 * one recorded as another job's is left to that job. Reading the old file's owner opens
 * SQLite read-only, and only on this upgrade path.
 */
function defaultSqlite(stateDir: string, name: string): { file: string; legacy?: boolean } {
  const own = path.join(stateDir, `${name}.db`);
  const legacy = path.join(stateDir, LEGACY_DEFAULT_SQLITE);
  if (own === legacy || fs.existsSync(own) || !fs.existsSync(legacy)) return { file: own };
  let owner: string | null;
  try {
    owner = readJob(legacy);
  } catch {
    // Unreadable now: keep it, and let the open (which checks the owner again) say why.
    return { file: legacy, legacy: true };
  }
  if (owner === name) return { file: legacy, legacy: true };
  if (owner !== null) return { file: own };
  // It records no job (written before ledgers did). The run locks beside it say who used
  // it: each job's default lock is `<name>.lock` there. Another job's lock (one without a
  // `<name>.db` of its own yet) and not ours: it is theirs, start our own. Ours and
  // another's: both jobs ran on it and its items are mixed; a person must choose.
  const ours = fs.existsSync(path.join(stateDir, `${name}.lock`));
  const others = lockOwnersBeside(stateDir).filter((job) => job !== name && !fs.existsSync(path.join(stateDir, `${job}.db`)));
  if (others.length === 0) return { file: legacy, legacy: true };
  if (!ours) return { file: own };
  throw new ConfigError(
    `state.sqlite: the old shared default ledger ${legacy} records no job, and both this job (${name}) and ${others.map((j) => `"${j}"`).join(', ')} ran on it (their locks are beside it), so its items may be mixed; set state.sqlite explicitly: ${legacy} to keep it for this job, or ${own} to start a new ledger`,
    undefined,
    'state.sqlite',
  );
}

/** Job names of the `<name>.lock` files in `dir` (the default run locks), or none. */
function lockOwnersBeside(dir: string): string[] {
  try {
    return fs
      .readdirSync(dir)
      .filter((f) => f.endsWith('.lock') && f.length > '.lock'.length)
      .map((f) => f.slice(0, -'.lock'.length));
  } catch {
    return [];
  }
}

/** `lock.kubernetesLease` with its defaults, or nothing when it is off. */
function kubernetesLease(p: ParsedConfig): Pick<Config['lock'], 'kubernetesLease'> {
  const kl = p.lock.kubernetesLease;
  if (!kl?.enabled) return {};
  return {
    kubernetesLease: {
      name: kl.name ?? p.name,
      ...(kl.namespace !== undefined ? { namespace: kl.namespace } : {}),
      durationSeconds: kl.durationSeconds ?? Math.ceil(p.lease.seconds),
      renewSeconds: kl.renewSeconds ?? p.lease.renewSeconds,
    },
  };
}

function checkPaths(file: string, c: Config): void {
  const problems: KeyProblem[] = [];
  const stat = (p: string): fs.Stats | undefined => fs.statSync(p, { throwIfNoEntry: false });

  const src = c.source.directory;
  const s = stat(src);
  if (!s) problems.push({ key: 'source.directory', message: `directory not found: ${src}` });
  else if (!s.isDirectory()) problems.push({ key: 'source.directory', message: `not a directory: ${src}` });
  else {
    try {
      // X_OK too: without search permission a readable directory cannot be walked.
      fs.accessSync(src, fs.constants.R_OK | fs.constants.X_OK);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'EACCES';
      problems.push({ key: 'source.directory', message: `directory not readable (${code}): ${src}` });
    }
  }

  const program = c.handler.command?.[0];
  if (program !== undefined) {
    const problem = programProblem(program, src, c.handler.env.PATH ?? process.env.PATH);
    if (problem) problems.push({ key: 'handler.command', message: `cannot run the program: ${problem}` });
  }

  if (c.handler.module !== undefined) {
    const m = stat(c.handler.module);
    if (!m) problems.push({ key: 'handler.module', message: `file not found: ${c.handler.module}` });
    else if (!m.isFile()) problems.push({ key: 'handler.module', message: `not a file: ${c.handler.module}` });
  }

  // Created on first use when missing; but an existing non-directory can never work.
  const out = c.output && stat(c.output.directory);
  if (c.output && out && !out.isDirectory()) {
    problems.push({ key: 'output.directory', message: `not a directory: ${c.output.directory}` });
  }
  if (c.output && s?.isDirectory()) {
    const inside = outputInsideSource(c.source.directory, c.output.directory, c.source.exclude);
    if (inside) problems.push({ key: 'output.directory', message: inside });
  }
  if (problems.length > 0) fail(file, problems);
}

/** realpath of the longest existing prefix of `p`, plus the rest: where `p` is or will be. */
function whereItIs(p: string): string {
  const rest: string[] = [];
  for (let cur = p; ; ) {
    try {
      return path.join(fs.realpathSync(cur), ...rest.reverse());
    } catch {
      const parent = path.dirname(cur);
      if (parent === cur) return p;
      rest.push(path.basename(cur));
      cur = parent;
    }
  }
}

/**
 * Outputs written inside source.directory become items on the next run (`a` -> `a.out`
 * -> `a.out.out` ...). Allowed only when the scan provably never enters the output
 * directory: `source.exclude` matches its path relative to the source (or a parent's),
 * which is where the scan prunes. Compared by real paths, so links on either side do not
 * hide it. The scan's own skip of output.directory by name is not counted as proof: it is
 * lexical, and a link in either path defeats it. Returns the problem, or null.
 */
function outputInsideSource(source: string, output: string, exclude: string[]): string | null {
  const src = whereItIs(source);
  const out = whereItIs(output);
  if (out === src) {
    return `${output} is source.directory itself: outputs (<id>.out) would become items on the next run (a -> a.out -> a.out.out ...); use a directory outside source.directory`;
  }
  if (!out.startsWith(src + path.sep)) return null;
  const rel = path.relative(src, out).split(path.sep).join('/');
  if (scanSkipsDirectory(exclude, rel)) return null;
  return (
    `${output} is inside source.directory (at ${rel}): outputs would become items on the next run (a -> a.out -> a.out.out ...); ` +
    `move it outside source.directory, or exclude it from the scan: source.exclude: ["${rel}/**"]`
  );
}

/**
 * The config as a plain object for the run-start log line, with no secrets: the
 * postgres and Pushgateway URLs lose their passwords, handler.env shows its keys
 * only. handler.command is shown (URL passwords redacted): argv is visible in
 * /proc to anyone on the node anyway, so secrets belong in handler.env.
 */
export function configSummary(c: Config): Record<string, unknown> {
  // A deep copy: the log line must not share (and let anyone mutate) the live config.
  return structuredClone({
    name: c.name,
    configPath: c.configPath,
    source: c.source,
    handler: {
      ...(c.handler.command ? { command: c.handler.command.map(redactUrl) } : {}),
      ...(c.handler.module ? { module: c.handler.module } : {}),
      timeoutSeconds: c.handler.timeoutSeconds,
      killAfterSeconds: c.handler.killAfterSeconds,
      maxLogBytes: c.handler.maxLogBytes,
      expectOutput: c.handler.expectOutput,
      envKeys: Object.keys(c.handler.env).sort(),
    },
    output: c.output,
    state:
      c.state.postgres !== undefined
        ? { postgres: redactUrl(c.state.postgres), ...(c.state.schema !== undefined ? { schema: c.state.schema } : {}) }
        : { sqlite: c.state.sqlite, allowNetworkFilesystem: c.state.allowNetworkFilesystem === true },
    concurrency: c.concurrency,
    queueSize: c.queueSize,
    lease: c.lease,
    retry: c.retry,
    drain: c.drain,
    lock: c.lock,
    schedule: c.schedule,
    events: c.events,
    retention: c.retention,
    scheduledTimestamp: c.scheduledTimestamp,
    metrics: c.metrics && {
      ...c.metrics,
      ...(c.metrics.pushgateway !== undefined ? { pushgateway: redactUrl(c.metrics.pushgateway) } : {}),
    },
    log: c.log,
  });
}
