/**
 * Unicode's bidirectional controls in an item id or a last error, in the text listings.
 * Raw, U+202E (RIGHT-TO-LEFT OVERRIDE) in `invoice<RLO>gpj.exe` shows as `invoiceexe.jpg`,
 * and one in a last error reorders the rest of its line (Trojan Source): an operator reads
 * something other than what is there, and pastes it back as an id no item has. The text
 * listings (`plan`, `dead-letter list`, `status`, `requeue --dry-run`) now JSON-quote such
 * an id with the control escaped (`"invoice\u202egpj.exe"`), which `dead-letter retry`
 * takes back; `--json` keeps the exact id.
 */
import { describe, expect, it } from 'vitest';
import { runCli, statusJson, workspace } from '../helpers/cli.js';

const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;
const NAME = 'invoice\u202egpj.exe';

describe('bidi controls in ids and last errors in the text listings', () => {
  it('are shown escaped, the printed id is taken back by dead-letter retry, and --json keeps them', async () => {
    const ws = workspace(
      // Fails every item with an RLO and an LRI in its stderr.
      { handler: { command: ['sh', '-c', "printf 'bad \\342\\200\\256input\\342\\201\\246 here' >&2; exit 3"] }, retry: { maxAttempts: 1 } },
      { [NAME]: 'x' },
    );
    const plan = await runCli(['plan', '-c', ws.configPath]);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stdout).toContain('"invoice\\u202egpj.exe"');
    expect(plan.stdout).not.toMatch(BIDI);

    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);

    const list = await runCli(['dead-letter', 'list', '-c', ws.configPath]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).not.toMatch(BIDI);
    expect(list.stdout).toContain('bad \\u202einput\\u2066 here');
    const printed = list.stdout.split('\n')[0]!.split('\t')[0]!;
    expect(printed).toBe('"invoice\\u202egpj.exe"');

    const status = await runCli(['status', '-c', ws.configPath]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain('"invoice\\u202egpj.exe"');
    expect(status.stdout).not.toMatch(BIDI);

    const dry = await runCli(['requeue', '--dry-run', '--all', '--include-dead', '-c', ws.configPath]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain('"invoice\\u202egpj.exe"');
    expect(dry.stdout).not.toMatch(BIDI);

    const json = await runCli(['dead-letter', 'list', '--json', '-c', ws.configPath]);
    const [dead] = JSON.parse(json.stdout) as { id: string; lastError: string }[];
    expect(dead?.id).toBe(NAME);
    expect(dead?.lastError).toBe('exit code 3: bad \u202einput\u2066 here');

    const retry = await runCli(['dead-letter', 'retry', '-c', ws.configPath, printed]);
    expect(retry.code, retry.stdout + retry.stderr).toBe(0);
    expect(retry.stdout).toBe('requeued 1 dead item\n');
    expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 1, dead: 0 });
  }, 60_000);
});

describe('zero-width characters in ids and last errors in the text listings', () => {
  it('are shown escaped (a<ZWSP>.txt does not pass for a.txt), and the printed id is taken back by dead-letter retry', async () => {
    const ZERO_WIDTH = /[\u200b-\u200d\u2060-\u2064\ufeff]/;
    const twin = 'a\u200b.txt';
    const ws = workspace(
      // Fails every item with a ZERO WIDTH JOINER in its stderr.
      { handler: { command: ['sh', '-c', "printf 'bad\\342\\200\\215input' >&2; exit 3"] }, retry: { maxAttempts: 1 } },
      { [twin]: 'x', 'a.txt': 'y' },
    );
    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);
    const list = await runCli(['dead-letter', 'list', '-c', ws.configPath]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).not.toMatch(ZERO_WIDTH);
    expect(list.stdout).toContain('bad\\u200dinput');
    const ids = list.stdout.trim().split('\n').map((l) => l.split('\t')[0]);
    expect(ids.sort()).toEqual(['"a\\u200b.txt"', 'a.txt']);
    const status = await runCli(['status', '-c', ws.configPath]);
    expect(status.stdout).not.toMatch(ZERO_WIDTH);
    const retry = await runCli(['dead-letter', 'retry', '-c', ws.configPath, '"a\\u200b.txt"']);
    expect(retry.code, retry.stdout + retry.stderr).toBe(0);
    expect(retry.stdout).toBe('requeued 1 dead item\n');
    expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 1, dead: 1 });
  }, 60_000);
});

describe('the other characters a terminal does not show (default-ignorable code points)', () => {
  it('a variation selector, a tag, a soft hyphen, U+206A: escaped in ids and last errors, taken back by dead-letter retry', async () => {
    // Before: only the bidi and zero-width ranges were escaped; these were shown raw, so
    // a<VS16>.txt read as a.txt (another item), and an astral tag as nothing at all.
    const HIDDEN = /\u00ad|\u206a|\ufe0f|\u{e0041}/u;
    const twins = ['a\ufe0f.txt', 'a\u{e0041}.txt', 'a\u00ad.txt', 'a\u206a.txt'];
    const ws = workspace(
      // Fails every item with TAG LATIN CAPITAL LETTER A (U+E0041: F3 A0 81 81) in its stderr.
      { handler: { command: ['sh', '-c', "printf 'bad\\363\\240\\201\\201input' >&2; exit 3"] }, retry: { maxAttempts: 1 } },
      Object.fromEntries([...twins, 'a.txt'].map((n) => [n, 'x'])),
    );
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    const list = await runCli(['dead-letter', 'list', '-c', ws.configPath]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).not.toMatch(HIDDEN);
    expect(list.stdout).toContain('bad\\udb40\\udc41input');
    const ids = list.stdout.trim().split('\n').map((l) => l.split('\t')[0]!);
    expect(ids.sort()).toEqual(['"a\\u00ad.txt"', '"a\\u206a.txt"', '"a\\udb40\\udc41.txt"', '"a\\ufe0f.txt"', 'a.txt']);
    expect((await runCli(['status', '-c', ws.configPath])).stdout).not.toMatch(HIDDEN);
    const retry = await runCli(['dead-letter', 'retry', '-c', ws.configPath, ...ids.filter((id) => id !== 'a.txt')]);
    expect(retry.code, retry.stdout + retry.stderr).toBe(0);
    expect(retry.stdout).toBe('requeued 4 dead items\n');
    expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 4, dead: 1 });
  }, 60_000);
});
