import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import type { ItemCounts } from '../../src/ledger/types.js';
import { configure, FIXTURES, finished, runCli, spawnCli, workspace, type Workspace } from '../helpers/cli.js';
import { invocations } from '../helpers/proc.js';
import { until } from '../helpers/wait.js';

const HELD_COPY = path.join(FIXTURES, 'process/held-copy.sh');

/** A workspace whose handler logs each invocation and holds the item `hold` (if given) until released. */
function heldWorkspace(files: string[]): Workspace & { log: string; hold: (id: string) => void } {
  const ws = workspace({}, Object.fromEntries(files.map((f) => [f, `content of ${f}`])));
  const log = path.join(ws.dir, 'invocations.log');
  const hold = (id: string) =>
    configure(ws, { handler: { command: ['/bin/sh', HELD_COPY, '{path}', '{output}'], env: { INVOCATIONS: log, HOLD_DIR: ws.dir, HOLD_ID: id } } });
  hold('');
  return Object.assign(ws, { log, hold });
}

async function counts(ws: Workspace): Promise<ItemCounts> {
  const ledger = await openSqliteLedger(ws.db, { readOnly: true });
  try {
    return await ledger.counts();
  } finally {
    await ledger.close();
  }
}

async function item(ws: Workspace, id: string) {
  const ledger = await openSqliteLedger(ws.db, { readOnly: true });
  try {
    return await ledger.get(id);
  } finally {
    await ledger.close();
  }
}

async function runToEnd(ws: Workspace) {
  const r = await runCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
  expect(r.code, r.stderr).toBe(0);
  return finished(r);
}

const requeue = async (ws: Workspace, ...args: string[]) => {
  const r = await runCli(['requeue', '-c', ws.configPath, ...args], { timeoutMs: 60_000 });
  return { ...r, json: r.code === 0 && args.includes('--json') ? (JSON.parse(r.stdout) as { count: number; first: string[]; dryRun: boolean }) : undefined };
};

let running: ReturnType<typeof spawnCli> | undefined;
afterEach(() => {
  running?.child.kill('SIGKILL');
  running = undefined;
});

describe('cronsafe requeue while a run is active (real runs, real SQLite ledger)', () => {
  it('by glob and by time: the claimed item is untouched, the others are processed again', async () => {
    const ws = heldWorkspace(['old/1.txt', 'old/2.txt', 'old/3.txt']);
    await runToEnd(ws); // old/* done
    await new Promise((r) => setTimeout(r, 20)); // a millisecond clock: done_at strictly before the mark
    const mark = new Date();
    for (const f of ['keep/1.txt', 'redo/1.txt', 'redo/2.txt']) {
      mkdirp(path.join(ws.source, f));
      writeFileSync(path.join(ws.source, f), f);
    }
    await runToEnd(ws); // keep/*, redo/1, redo/2 done after the mark
    writeFileSync(path.join(ws.source, 'redo/held.txt'), 'held');
    ws.hold('redo/held.txt');
    running = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
    await until(() => existsSync(path.join(ws.dir, 'held')), 'the held item to start');
    const before = await item(ws, 'redo/held.txt');
    expect(before).toMatchObject({ state: 'claimed', attempts: 1 });

    // A dry run first: counts, changes nothing.
    const dry = await requeue(ws, '--glob', 'redo/**', '--dry-run', '--json');
    expect(dry.json).toEqual({ dryRun: true, count: 2, first: ['redo/1.txt', 'redo/2.txt'], notRequeued: [] });
    expect(await counts(ws)).toEqual({ pending: 0, claimed: 1, done: 6, dead: 0 });

    const byGlob = await requeue(ws, '--glob', 'redo/**', '--json');
    expect(byGlob.code, byGlob.stderr).toBe(0);
    expect(byGlob.json).toMatchObject({ count: 2, first: ['redo/1.txt', 'redo/2.txt'] });
    const byTime = await requeue(ws, '--done-before', mark.toISOString());
    expect(byTime.code, byTime.stderr).toBe(0);
    expect(byTime.stdout).toMatch(/^requeued 3 items/);
    expect(byTime.stdout).toContain('old/1.txt');
    // Everything else, while the claim is still held: the claim is not among them.
    const all = await requeue(ws, 'redo/held.txt');
    expect(all.code).toBe(1);
    expect(all.stdout).toContain('redo/held.txt: claimed (an attempt is running; left alone)');
    expect(await item(ws, 'redo/held.txt')).toEqual(before);

    writeFileSync(path.join(ws.dir, 'release'), '');
    const { code } = await running.exited;
    expect(code).toBe(0);
    ws.hold('');
    await runToEnd(ws);

    expect(await counts(ws)).toEqual({ pending: 0, claimed: 0, done: 7, dead: 0 });
    const ran = invocations(ws.log);
    expect(Object.fromEntries(ran)).toEqual({
      'old/1.txt': 2, 'old/2.txt': 2, 'old/3.txt': 2, 'redo/1.txt': 2, 'redo/2.txt': 2, 'keep/1.txt': 1, 'redo/held.txt': 1,
    });
    expect(readdirSync(path.join(ws.out), { recursive: true }).filter((f) => String(f).endsWith('.out'))).toHaveLength(7);
    // The requeued items started a new cycle: attempt 1 again.
    expect(await item(ws, 'old/1.txt')).toMatchObject({ state: 'done', attempts: 1 });
    const status = await runCli(['status', '-c', ws.configPath, '--json']);
    expect(JSON.parse(status.stdout)).toMatchObject({ requeued: 5 });
  }, 180_000);
});

describe('cronsafe requeue: selection and bad input', () => {
  it('refuses a missing ledger without creating it', async () => {
    const ws = heldWorkspace(['a.txt']);
    const r = await requeue(ws, '--all');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`no ledger file at ${ws.db}`);
    expect(existsSync(ws.db)).toBe(false);
    expect(existsSync(ws.state)).toBe(false);
  });

  it('names what was wrong: no selector, an impossible date, a bad glob, conflicting selectors (exit 2)', async () => {
    const ws = heldWorkspace(['a.txt']);
    await runToEnd(ws);
    const cases: Array<[string[], RegExp]> = [
      [[], /requeue: nothing selected \(give item ids, --glob, --done-before \/ --done-after, or --all\)/],
      [['--done-before', '2026-02-30'], /--done-before <iso>' argument '2026-02-30' is invalid\. expected an ISO 8601 date/],
      [['--done-after', '2026-11-30T24:00:00Z'], /--done-after <iso>' argument .* is invalid/],
      // The escape of the stray `[` (picomatch advised `\\]`, in a glob over ids a backslash's text).
      [['--glob', 'a/[b'], /--glob <glob>' argument 'a\/\[b' is invalid\. not a valid glob: Missing closing: "\]" - write "\\\[" for a literal "\["$/m],
      // picomatch made it a regular expression that matches nothing: before, 0 items, exit 0.
      [['--glob', '[z-a]*'], /--glob <glob>' argument '\[z-a\]\*' is invalid\. not a valid glob: Range out of order in character class$/m],
      [['--glob', '/abs/*'], /expected a glob relative to source\.directory/],
      [['--glob', '../x'], /no "\.\." segment/],
      // Ids have no empty or "." segment: before, 0 items, exit 0, as source.include refuses them (78).
      [['--glob', 'logs//old/**'], /--glob <glob>' argument .* is invalid\. expected a glob that can match an item: an empty segment/],
      [['--glob', 'in/./*.csv'], /a "\." segment matches none/],
      // A lone backslash at the end escapes nothing (ids write a backslash as \\): before, 0 items, silently.
      [['--glob', 'redo\\'], /--glob <glob>' argument 'redo\\' is invalid\. expected a glob that can match an item: one ending in a lone "\\" escapes nothing/],
      // Ids never end in "/": before, 0 items, exit 0, silently (source.include refuses it too).
      [['--glob', 'tmp/'], /--glob <glob>' argument 'tmp\/' is invalid\. expected a glob that can match an item: one ending in "\/" matches none \(ids name files\); write "dir\/\*\*"/],
      // A leading "!" is every other item: with a second --glob, the .gitignore way to leave some out requeued all the rest.
      [['--glob', 'a/**', '--glob', '!a/bad/**'], /--glob <glob>' argument '!a\/bad\/\*\*' is invalid\. not a valid glob: a leading "!" selects every other item/],
      [['a.txt', '--all'], /give item ids or a selection \(--all\), not both/],
      [['--all', '--glob', '*'], /--all selects every item: drop it, or drop --glob/],
      [['--done-after', '2026-03-01', '--done-before', '2026-02-01'], /--done-after 2026-03-01T00:00:00\.000Z is not before --done-before/],
    ];
    for (const [args, message] of cases) {
      const r = await requeue(ws, ...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toMatch(message);
    }
    expect(await counts(ws)).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
  }, 120_000);

  it('dead items only with --include-dead, as dead-letter retry (attempts reset)', async () => {
    const ws = heldWorkspace(['bad.txt', 'good.txt']);
    configure(ws, {
      handler: { command: ['/bin/sh', HELD_COPY, '{path}', '{output}'], env: { INVOCATIONS: ws.log, HOLD_DIR: ws.dir, FAIL_GLOB: 'bad*' } },
      retry: { maxAttempts: 1 },
    });
    await runToEnd(ws);
    expect(await item(ws, 'bad.txt')).toMatchObject({ state: 'dead', attempts: 1 });
    const plain = await requeue(ws, '--all', '--json');
    expect(plain.json).toMatchObject({ count: 1, first: ['good.txt'] });
    const named = await requeue(ws, 'bad.txt');
    expect(named.code).toBe(1);
    expect(named.stdout).toContain('1 of the given ids was not requeued:\n  bad.txt: dead (add --include-dead, or use dead-letter retry)');
    const dead = await requeue(ws, '--all', '--include-dead', '--json');
    expect(dead.json).toMatchObject({ count: 1, first: ['bad.txt'] });
    expect(await item(ws, 'bad.txt')).toMatchObject({ state: 'pending', attempts: 0, lastError: expect.stringContaining('failing on purpose') });
  }, 120_000);

  it('shows the ids its --dry-run showed: the first in id order, not in the order the items were discovered', async () => {
    const ws = heldWorkspace(['z1.txt', 'z2.txt', 'z3.txt']);
    await runToEnd(ws);
    // Discovered later: later rows in the ledger, but first by id.
    for (const f of ['a1.txt', 'a2.txt', 'a3.txt']) writeFileSync(path.join(ws.source, f), f);
    await runToEnd(ws);
    const dry = await requeue(ws, '--all', '--dry-run', '--json', '--limit', '4');
    expect(dry.json).toMatchObject({ dryRun: true, count: 6, first: ['a1.txt', 'a2.txt', 'a3.txt', 'z1.txt'] });
    const real = await requeue(ws, '--all', '--json', '--limit', '4');
    expect(real.json).toMatchObject({ dryRun: false, count: 6, first: dry.json!.first });
  }, 120_000);

  it('--glob matches ids as source.include does: a brace list takes no dotfile the glob does not write', async () => {
    // Dotfiles are items here (include writes them), so the ledger holds both kinds.
    const ws = workspace({ handler: { command: ['true'] } }, {
      'a/report.txt': 'r',
      'a/.report.txt': 'hidden',
      'a/notes.md': 'n',
    });
    configure(ws, { source: { directory: ws.source, include: ['**/{*,.*}'] } });
    const first = await runCli(['run', '-c', ws.configPath]);
    expect(finished(first)?.counts, first.stderr).toMatchObject({ succeeded: 3 });
    const dry = await requeue(ws, '--glob', '**/{*.txt,*.md}', '--dry-run', '--json');
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.json?.first.sort()).toEqual(['a/notes.md', 'a/report.txt']);
    // Written, the dot is matched: only the dotfile.
    const dot = await requeue(ws, '--glob', '**/.{report,other}.txt', '--dry-run', '--json');
    expect(dot.json?.first).toEqual(['a/.report.txt']);
  }, 60_000);
});

describe('cronsafe requeue --glob with a bracket expression as source.include reads it', () => {
  it('[!]]* is any name not starting with "]" (it was refused: Missing opening "[")', async () => {
    const ws = workspace({ handler: { command: ['true'] } }, { 'a.txt': 'a', '].txt': 'b' });
    const first = await runCli(['run', '-c', ws.configPath]);
    expect(finished(first)?.counts, first.stderr).toMatchObject({ succeeded: 2 });
    const dry = await requeue(ws, '--glob', '[!]]*', '--dry-run', '--json');
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.json?.first).toEqual(['a.txt']);
  }, 60_000);
});

describe('cronsafe requeue of an id as plan and requeue --dry-run printed it', () => {
  it('a JSON-quoted id (a tab, a newline, quotes) pasted back is that id; one that really has its quotes is taken as given', async () => {
    const odd = ['tab\there.txt', 'new\nline.txt', 'say "hi".txt'];
    const quoted = '"plain.txt"'; // a file named with its quotes: list --json gives it so
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/copy-module.mjs') } }, Object.fromEntries([...odd, quoted, 'plain.txt'].map((f) => [f, 'x'])));
    await runToEnd(ws);
    const dry = await requeue(ws, '--all', '--dry-run', '--limit', '10');
    expect(dry.code, dry.stderr).toBe(0);
    const printed = dry.stdout.split('\n').filter((l) => l.startsWith('  ')).map((l) => l.slice(2));
    for (const id of odd) expect(printed).toContain(JSON.stringify(id));
    for (const id of odd) {
      const r = await requeue(ws, JSON.stringify(id));
      expect(r.code, r.stdout + r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^requeued 1 item: pending again/);
      expect((await item(ws, id))?.state).toBe('pending');
    }
    const literal = await requeue(ws, quoted);
    expect(literal.code, literal.stdout + literal.stderr).toBe(0);
    expect((await item(ws, quoted))?.state).toBe('pending');
    expect((await item(ws, 'plain.txt'))?.state).toBe('done');
  }, 120_000);
});

function mkdirp(file: string): void {
  mkdirSync(path.dirname(file), { recursive: true });
}
