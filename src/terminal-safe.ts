/**
 * Text for a terminal that holds no raw DEL or C1 control (U+007F-U+009F): a leaf module,
 * shared by the log's destination (log.ts), the operator commands' output (Sink) and stderr.
 */

const RAW = /[\u007f-\u009f]/;
const RAW_ALL = /[\u007f-\u009f]/g;

/**
 * DEL and the C1 controls as JSON escapes (`\u009b`). JSON.stringify and pino escape only
 * U+0000-U+001F, so a handler's stderr or a file name holding U+009B (CSI) or U+009D (OSC),
 * which xterm and VTE take as controls in UTF-8, reached the operator's terminal raw through
 * `kubectl logs`, a pretty log or `--json` output, as ESC never does. In JSON text (inside a
 * string, the only place they can be) the escape means the same character, so the output
 * parses to exactly the same values; status.ts shows them so in its text listings too.
 */
export function escapeC1(text: string): string {
  return RAW.test(text) ? text.replace(RAW_ALL, escapeControl) : text;
}

/**
 * Plain text (not JSON) with every control character, C0 (ESC, newline) as well as DEL and
 * C1, as a JSON escape: for a Kubernetes Event's message, which `kubectl describe` prints
 * as it is, one table row per Event, and for the one line a failed run writes on stderr.
 */
export function escapeControls(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, escapeControl);
}

/** A control character as a JSON escape (`\u001b`): shown, never sent to the terminal. */
export const escapeControl = (c: string): string => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/** escapeControl for a code point past U+FFFF too: each UTF-16 unit (`\udb40\udc41`), which JSON reads back. */
export const escapeUnits = (c: string): string => c.split('').map(escapeControl).join('');

/**
 * Characters a terminal does not show: Unicode's default-ignorable code points, for a
 * character class (flag 'u'). They hold the bidirectional controls (U+061C, U+200E-U+200F,
 * U+202A-U+202E, U+2066-U+2069), which reorder the rest of the line (Trojan Source), and
 * the ones that take no room: zero-width (U+200B-U+200D, U+2060-U+2064, U+FEFF), the soft
 * hyphen, the variation selectors (U+FE00-U+FE0F), the deprecated format controls
 * (U+206A-U+206F), the tags (U+E0000-), fillers (U+3164): each makes two different ids
 * look the same (`a<VS16>.txt` is `a.txt`). Text for an operator shows them as JSON escapes.
 */
export const INVISIBLE = '\\p{Default_Ignorable_Code_Point}';
const INVISIBLE_ALL = new RegExp(`[${INVISIBLE}]`, 'gu');

/** INVISIBLE characters as JSON escapes (escapeUnits). */
export function escapeInvisible(text: string): string {
  return text.replace(INVISIBLE_ALL, escapeUnits);
}

/**
 * escapeControls for stderr text of several lines (a list of config problems, a YAML
 * excerpt, a stack trace): newlines and tabs are kept. stderr is written as it is, not as
 * JSON, and an error's message can hold a name a producer chose (an item path) or a
 * handler's stderr (`exit code 3: ...`): raw, its ESC, BEL or U+009B drove the terminal of
 * whoever ran cronsafe or read `kubectl logs`, which shows stderr too.
 */
export function escapeControlsButLayout(text: string): string {
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, escapeControl);
}

const TERMINAL_ACTS_ON = new RegExp(`[\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f${INVISIBLE}]`, 'gu');

/**
 * Command output (the Sink: status, dead-letter list, plan, requeue, schedule; text or
 * `--json`) with every character a terminal acts on or does not show as a JSON escape: C0
 * (ESC, BEL, backspace, carriage return) but newline and tab, DEL, C1, and the INVISIBLE ones
 * (bidirectional overrides). The text came partly from ledger rows anyone who can write the
 * ledger fills (a shared PostgreSQL ledger's run ids, outcomes, counts): with only C1 escaped,
 * a run id holding `ESC [2J` or an OSC title or clipboard write reached the operator's
 * terminal raw through `cronsafe status`. JSON text holds such characters only inside its
 * strings (JSON.stringify escapes C0 there, and puts only newlines and spaces between
 * values), where the escape means the same character: `--json` parses to the same values.
 */
export function escapeForTerminal(text: string): string {
  return text.replace(TERMINAL_ACTS_ON, escapeUnits);
}
