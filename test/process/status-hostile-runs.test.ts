/**
 * `cronsafe status` lists recent runs from the ledger's `runs` rows: their run id, outcome and
 * counts. On a shared PostgreSQL ledger anyone with write access can fill those rows (and
 * anyone with the SQLite file); only C1 controls were escaped, so a run id holding ESC
 * sequences (a screen clear, a title set, an OSC 52 clipboard write), BEL, a backspace or a
 * bidirectional override reached the operator's terminal raw. Every control character is now
 * shown as a JSON escape in the human output; `--json` stays valid JSON with the same values.
 * Tested on SQLite (the rows written by hand); PostgreSQL shares status.ts and the Sink.
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';

// ESC (a CSI clear and an OSC title), BEL, backspace, carriage return, DEL, a C1 CSI, RLO.
const HOSTILE_ID = 'run\u001b[2J\u001b]0;owned\u0007\b\r\u007f\u009b31m\u202eexe.txt';
const HOSTILE_OUTCOME = 'completed\u001b[8m';
/** A time past any Date's (8.64e15 ms): new Date(it).toISOString() throws. */
const NO_DATE = 9e15;
/** Anything a terminal acts on or hides, raw: C0 but newline and tab, DEL, C1, bidi and zero-width controls. */
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069]/u;

describe('status: run rows with control characters, written into the ledger by hand', () => {
  it('shows them escaped, never raw; --json stays valid and keeps them exactly', async () => {
    const ws = workspace({ handler: { command: ['cat', '{path}'] } }, { 'a.txt': 'a' });
    const first = await runCli(['run', '-c', ws.configPath]);
    expect(first.code, first.stderr).toBe(0);
    const db = new Database(ws.db);
    try {
      const changed = db
        .prepare('UPDATE runs SET run_id = ?, outcome = ?, counts = ?, started_at = ?')
        .run(HOSTILE_ID, HOSTILE_OUTCOME, JSON.stringify({ succeeded: '\u001b]52;c;cm0gLXJmIC8K\u0007', failed: 0 }), NO_DATE).changes;
      expect(changed).toBe(1);
    } finally {
      db.close();
    }

    const text = await runCli(['status', '-c', ws.configPath]);
    expect(text.code, text.stderr).toBe(0);
    // Before: ESC, BEL, BS, CR and the RLO were written raw (only DEL and C1 were escaped).
    expect(text.stdout).not.toMatch(RAW_CONTROL);
    expect(text.stdout).toContain('run\\u001b[2J\\u001b]0;owned\\u0007\\u0008\\u000d\\u007f\\u009b31m\\u202eexe.txt');
    expect(text.stdout).toContain('completed\\u001b[8m');
    // A start no Date holds (written by hand): shown as its number; before, status crashed (RangeError).
    expect(text.stdout).toContain(`  ${NO_DATE}  `);
    expect(text.stdout).toContain('\\u001b]52;c;cm0gLXJmIC8K\\u0007');

    const json = await runCli(['status', '--json', '-c', ws.configPath]);
    expect(json.code, json.stderr).toBe(0);
    expect(json.stdout).not.toMatch(RAW_CONTROL);
    const report = JSON.parse(json.stdout) as { recentRuns: { runId: string; outcome: string; counts: Record<string, unknown> }[] };
    expect(report.recentRuns[0]).toMatchObject({ runId: HOSTILE_ID, outcome: HOSTILE_OUTCOME, counts: { succeeded: '\u001b]52;c;cm0gLXJmIC8K\u0007' } });
  }, 60_000);
});
