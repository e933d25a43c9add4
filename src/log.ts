import { pino, type Logger, type DestinationStream } from 'pino';
import pretty from 'pino-pretty';
import type { Config } from './config/types.js';

/**
 * The one root logger. JSON lines on stdout for `kubectl logs`; `pretty` for a human at a
 * terminal. Writes are synchronous so that the final `run finished` record is never lost
 * when the process exits right after it.
 */
export function createLogger(
  log: Config['log'] = { level: 'info', format: 'json' },
  destination?: DestinationStream,
  base: Record<string, unknown> = {},
): Logger {
  const stream =
    destination ??
    (log.format === 'pretty'
      ? pretty({ sync: true, colorize: process.stdout.isTTY ?? false, destination: 1 })
      : pino.destination({ dest: 1, sync: true }));
  return pino(
    {
      level: log.level,
      base: { ...base },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    stream,
  );
}
