/**
 * A usage error quotes the argument it refuses (`unknown command '...'`, `argument '...' is
 * invalid`). That text is commander's, written to stderr as it is: an argument holding ESC
 * or a C1 control (a glob or a date cut from a listing of file names, a command built from
 * one) drove the operator's terminal (cleared it, set its title), where every other line
 * cronsafe writes shows them as JSON escapes (`\u001b`). Exit 2 as before; the help after
 * the error keeps its layout.
 */
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';

const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

describe('usage errors never write an argument control character raw', () => {
  it.each([
    [['\u001b]0;pwned\u0007'], "unknown command '\\u001b]0;pwned\\u0007'"],
    [['requeue', '--glob', '\u001b[2J[', '-c', 'x.yaml'], "argument '\\u001b[2J[' is invalid"],
    [['dead-letter', 'list', '--since', '\u009b2J'], "argument '\\u009b2J' is invalid"],
    [['status', '--\u001b[31mjson'], "unknown option '--\\u001b[31mjson'"],
  ])('%j', async (args: string[], shown: string) => {
    const r = await runCli(args);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain(shown);
    expect(r.stderr).not.toMatch(RAW);
    expect(r.stderr).toContain('Usage: cronsafe');
  });
});
