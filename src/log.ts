import { createRequire } from 'node:module';
import { pino, type Logger, type DestinationStream } from 'pino';
import type PinoPretty from 'pino-pretty';
import type { Config } from './config/types.js';

// pino-pretty (and its dozen dependencies) only for `log.format: pretty`: a JSON run does
// not pay for loading it. It is CommonJS, so require() keeps createLogger synchronous.
const require = createRequire(import.meta.url);
const loadPretty = (): typeof PinoPretty => require('pino-pretty') as typeof PinoPretty;

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
      ? loadPretty()({ sync: true, colorize: process.stdout.isTTY ?? false, destination: 1 })
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
