/**
 * The resolved configuration: every default applied, every relative path made absolute
 * (relative to the directory of the config file). Produced by `loadConfig()`; the YAML
 * shape is documented in docs/configuration.md and ../shared/DESIGN.md.
 */
export interface Config {
  /** Identity: lock, lease, metric label. `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, <= 52 chars (fits a CronJob name). */
  name: string;
  /** Absolute path of the file this config was loaded from. */
  configPath: string;
  source: SourceConfig;
  handler: HandlerConfig;
  /** Absent: handlers get no `{output}` and nothing is renamed. */
  output?: { directory: string };
  state: StateConfig;
  /** Items in flight at once. Default min(8, 2 x cores). */
  concurrency: number;
  /** Bound of the channel between scanner and workers. Default 4 x concurrency. */
  queueSize: number;
  lease: { seconds: number; renewSeconds: number };
  retry: RetryConfig;
  drain: { gracePeriodSeconds: number; marginSeconds: number };
  lock: {
    path: string;
    /** Run even when `path` is on a network or FUSE file system (a warning each run). Default false: exit 78. */
    allowNetworkFilesystem?: boolean;
    /** Present only when the Kubernetes Lease lock is enabled (docs/kubernetes-api.md). */
    kubernetesLease?: KubernetesLeaseConfig;
  };
  schedule?: ScheduleConfig;
  /** `cronsafe daemon` only. */
  daemon: DaemonConfig;
  metrics?: { port?: number; pushgateway?: string; pushIntervalSeconds: number };
  /** Kubernetes Events on the Job/CronJob (skipped start, overrun, dead letter). Absent: off. */
  events?: { enabled: boolean };
  /** What the ledger keeps (pruned at the end of each pass; docs/configuration.md). */
  retention: RetentionConfig;
  /** Read the run's occurrence from the Job's cronjob-scheduled-timestamp annotation. Absent: off. */
  scheduledTimestamp?: { enabled: boolean };
  log: { level: LogLevel; format: 'json' | 'pretty' };
}

/** The resolved `lock.kubernetesLease`: a coordination.k8s.io/v1 Lease held for the whole pass. */
export interface KubernetesLeaseConfig {
  /** Lease name; default: the config's `name`. */
  name: string;
  /** Default: the pod's namespace (CRONSAFE_POD_NAMESPACE / POD_NAMESPACE / the service account's), else the kubeconfig's. */
  namespace?: string;
  /** spec.leaseDurationSeconds: how long the Lease holds without renewal. Default: lease.seconds, rounded up. */
  durationSeconds: number;
  /** Renewal interval, < durationSeconds. Default: lease.renewSeconds. */
  renewSeconds: number;
}

export interface RetentionConfig {
  /** Finished runs kept, newest first (events too); older ones are folded into totals and deleted. >= 20. Default 1000. */
  runs: number;
  /** Finished runs and events older than this many days are folded into totals and deleted. Default 30. */
  days: number;
  /** A done item whose file complete scans have not found for this many days is forgotten. Default 30. */
  forgetMissingAfterDays: number;
}

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

export interface SourceConfig {
  /** Absolute directory scanned for items. */
  directory: string;
  /** Globs relative to `directory`; default `["**"]` (all files). */
  include: string[];
  exclude: string[];
}

export interface HandlerConfig {
  /** argv, never a shell; placeholders {path} {id} {output} {attempt}. Exactly one of command/module. */
  command?: string[];
  /** Absolute path of an ES module whose default export is `async (item, ctx) => void`. */
  module?: string;
  timeoutSeconds: number;
  /** Seconds between SIGTERM and SIGKILL to the handler's process group on timeout/abort. Default 5. */
  killAfterSeconds: number;
  /** Cap on captured stdout+stderr per attempt, in bytes. Default 65536. */
  maxLogBytes: number;
  /**
   * A successful attempt that wrote nothing to `{output}` is a failure. Default false
   * (handlers that write elsewhere); attempts without output are counted either way.
   * Absent (programmatic callers): false.
   */
  expectOutput?: boolean;
  /** Extra environment for command handlers. */
  env: Record<string, string>;
}

export interface StateConfig {
  /**
   * Absolute path of the SQLite ledger (the default: `<config dir>/.cronsafe/<name>.db`).
   * One job per ledger: the first to open it records its `name`, any other is refused.
   */
  sqlite?: string;
  /**
   * True when `sqlite` is the old shared default `<config dir>/.cronsafe/cronsafe.db`, kept
   * because `<name>.db` does not exist yet and the old file is unowned or this job's.
   */
  legacyDefault?: boolean;
  /** True when `sqlite` was not set: the ledger is the default beside the config file. */
  defaulted?: boolean;
  /** Use a `sqlite` file on a network or FUSE file system (a warning each run). Default false: exit 78. */
  allowNetworkFilesystem?: boolean;
  /** PostgreSQL URL (issue 6). Never logged with its password. */
  postgres?: string;
  /** PostgreSQL schema of the ledger (`[a-z_][a-z0-9_]*`); absent: `cronsafe`. Ignored with sqlite. */
  schema?: string;
}

export interface RetryConfig {
  /** Charged attempts after which an item is dead-lettered. Default 5. */
  maxAttempts: number;
  backoffSeconds: number;
  backoffMaxSeconds: number;
}

export interface ScheduleConfig {
  cron: string;
  timeZone?: string;
  graceSeconds?: number;
  refresh: 'never' | 'every-occurrence' | 'on-change';
  /**
   * The second fire of a fixed-time schedule in a repeated fall-back hour (Kubernetes fires
   * `30 1 * * *` twice that night): `run` it (default, as Kubernetes does) or `skip` it.
   */
  repeatedFire: 'run' | 'skip';
}

export interface DaemonConfig {
  /** How often the daemon looks at the clock. Default 30. */
  tickSeconds: number;
  /** Run again between occurrences when the source has grown since the last completed pass. */
  growth: { enabled: boolean; cooldownSeconds: number; maxIncompletePasses: number };
}
