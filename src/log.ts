import { createRequire } from 'node:module';
import { pino, type Logger, type DestinationStream } from 'pino';
import type PinoPretty from 'pino-pretty';
import type { Config } from './config/types.js';
import { StdoutSink } from './log-sink.js';
import { escapeC1 } from './terminal-safe.js';

// pino-pretty (and its dozen dependencies) only for `log.format: pretty`: a JSON run does
// not pay for loading it. It is CommonJS, so require() keeps createLogger synchronous.
const require = createRequire(import.meta.url);
const loadPretty = (): typeof PinoPretty => require('pino-pretty') as typeof PinoPretty;

/**
 * The one root logger. JSON lines on stdout for `kubectl logs`; `pretty` for a human at a
 * terminal. The log into a pipe or a socket never waits for its reader (log-sink.ts: a reader that
 * stops reading must not freeze the run), and cli.ts waits for them before the run exits,
 * so the final `run finished` record is not lost; anywhere else (a file, a terminal) writes
 * are synchronous.
 */
export function createLogger(
  log: Config['log'] = { level: 'info', format: 'json' },
  destination?: DestinationStream,
  base: Record<string, unknown> = {},
): Logger {
  const options = {
    level: log.level,
    base: { ...base },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
  };
  const sink = destination === undefined ? StdoutSink.forStdout() : null;
  if (sink) {
    // A run's last line, its outcome: a handler's own line that says `run finished` has no
    // unescaped `"exitCode":` (its text is a JSON string).
    const runFinished = (json: string): boolean => json.endsWith('"msg":"run finished"}\n') && json.includes('"exitCode":');
    let out: DestinationStream;
    if (log.format === 'pretty') {
      // `cronsafe run | less`: the text pino-pretty makes of each line, through the sink. A
      // pipe is no terminal: no colours. Which line to keep is known from its JSON.
      const pretty = loadPretty().prettyFactory({ colorize: false });
      let keepNext = false;
      sink.keep = () => keepNext;
      out = {
        write(json: string) {
          keepNext = runFinished(json);
          sink.write(escapeC1(pretty(json)));
          keepNext = false;
        },
      };
    } else {
      sink.keep = runFinished;
      out = escapingControls(sink);
    }
    const logger = pino(options, out);
    sink.onDropped = (lines) => logger.warn({ droppedLines: lines }, 'stdout was not read for a while (a stalled log reader): log lines were dropped');
    return logger;
  }
  const stdout = (): DestinationStream => carryOnWithout(escapingControls(pino.destination({ dest: 1, sync: true })));
  // pino-pretty pipes into its destination: an error there only tears its pipeline down
  // (the log then vanished without a word), so its destination is the stream listened on.
  const stream = destination ?? (log.format === 'pretty' ? loadPretty()({ sync: true, colorize: process.stdout.isTTY ?? false, destination: stdout() }) : stdout());
  return pino(options, stream);
}

/**
 * Every line that reaches fd 1 with its raw C1 controls escaped (terminal-safe.ts): a JSON
 * line, or pino-pretty's text, whose fields it prints as JSON strings (it strips controls
 * from the message only). One regex test per line when there is none.
 */
function escapingControls<S extends DestinationStream>(stream: S): S {
  const write = stream.write.bind(stream);
  stream.write = (line: string) => write(typeof line === 'string' ? escapeC1(line) : line);
  return stream;
}

type Silenceable = DestinationStream & { on?: (event: 'error', fn: (err: NodeJS.ErrnoException) => void) => unknown; end?: () => void; flushSync?: () => void };

/**
 * A log that stdout cannot take (a full disk under `> file`, an I/O error) must not end the
 * run: the ledger, not the log, is its record, and a run that died there would leave its
 * claims to be taken back and charged. Say so once on stderr and drop the rest of the log,
 * as pino itself does for a reader that left (EPIPE). Without this, the first line past the
 * failure threw out of whatever was logging.
 */
function carryOnWithout<S extends Silenceable>(stream: S): S {
  let told = false;
  stream.on?.('error', (err) => {
    // pino's own listener re-emits what is not EPIPE: this one hears it twice.
    if (told) return;
    told = true;
    const noop = (): boolean => true;
    Object.assign(stream, { write: noop, end: noop, flushSync: noop });
    try {
      process.stderr.write(`cronsafe: cannot write the log to stdout (${err.code ?? err.message}); carrying on without it\n`);
    } catch {
      // stderr failed too: nothing left to tell.
    }
  });
  return stream;
}
