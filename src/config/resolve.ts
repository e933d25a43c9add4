import { lstatSync, realpathSync, statSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { defaultSqlite } from '../ledger/default-sqlite.js';
import type { ParsedConfig } from './schema.js';
import type { Config } from './types.js';

/**
 * The directory relative paths in the config resolve against: the config file's. A config
 * read through a descriptor (`-c /dev/stdin`, `-c <(envsubst < job.yaml)`: /dev/fd/63) has
 * none of its own: /dev or /dev/fd, where a relative `source.directory` was not found and
 * the default ledger went to /dev/.cronsafe, on a tmpfs lost at every restart (every item
 * done again). Its real file's directory when it is one (`< /etc/cronsafe/job.yaml`), else
 * the working directory.
 */
function baseDir(abs: string): string {
  const dir = path.dirname(abs);
  if (!/^\/(dev|proc)(\/|$)/.test(dir)) return dir;
  try {
    // A file of its own under /dev is a config like any other (/dev/shm/job.yaml, on a tmpfs
    // people keep files in: its paths were resolved against the working directory).
    if (lstatSync(abs).isFile()) return dir;
    const real = realpathSync(abs);
    if (statSync(real).isFile()) return path.dirname(real);
  } catch {
    // A pipe's or socket's link (pipe:[1234]) names no file.
  }
  return process.cwd();
}

/** Machine- and location-dependent defaults, absolute paths. */
export function resolveConfig(p: ParsedConfig, abs: string): Config {
  const dir = baseDir(abs);
  const at = (x: string): string => path.resolve(dir, x);
  const stateDir = path.join(dir, '.cronsafe');
  const sqlite =
    p.state.postgres !== undefined ? undefined
    : p.state.sqlite !== undefined ? { file: at(p.state.sqlite), legacy: false, defaulted: false }
    : { legacy: false, ...defaultSqlite(stateDir, p.name), defaulted: true };
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
        ? { sqlite: sqlite.file, ...(sqlite.legacy ? { legacyDefault: true } : {}), ...(sqlite.defaulted ? { defaulted: true } : {}), allowNetworkFilesystem: p.state.allowNetworkFilesystem }
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
