import { redactUrl } from '../redact.js';
import { configRedactor } from './secrets.js';
import type { Config } from './types.js';

/**
 * The config as a plain object for the run-start log line, with no secrets: the
 * postgres and Pushgateway URLs lose their passwords, handler.env shows its keys
 * only. handler.command is shown (URL passwords redacted): argv is visible in
 * /proc to anyone on the node anyway, so secrets belong in handler.env.
 */
export function configSummary(c: Config): Record<string, unknown> {
  // And the known secrets anywhere in an argument (a shell line that quotes the ledger's URL).
  const redact = configRedactor(c);
  // A deep copy: the log line must not share (and let anyone mutate) the live config.
  return structuredClone({
    name: c.name,
    configPath: c.configPath,
    source: c.source,
    handler: {
      // The known secrets first: redactUrl takes an argument holding a password with a ':'
      // before an '@' (`--db-password=Zx:4@kq`) for a user and password, and left pieces of it.
      ...(c.handler.command ? { command: c.handler.command.map((arg) => redactUrl(redact(arg))) } : {}),
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
    // What `cronsafe daemon` does with the schedule (validate shows the config it would run).
    ...(c.schedule !== undefined ? { daemon: c.daemon } : {}),
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
