/**
 * An id given on the command line in the raw bytes of a name that is not UTF-8 (pasted from
 * `ls`, or from a shell's completion of the source file): Node reads such an argument with
 * U+FFFD for each foreign byte, so it names no item. `dead-letter retry` and `requeue` said
 * only "unknown (not in the ledger)" of an item the listings show; they now say how to give it.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, FIXTURES, runCli, spawnCliRaw, statusJson, workspace } from '../helpers/cli.js';

/** The CLI with its last argument made by printf from `printed` (`corrupt-caf\\351.scc`: the raw bytes `corrupt-caf<0xE9>.scc`). */
async function withRawId(args: string[], printed = 'corrupt-caf\\351.scc'): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const p = spawnCliRaw('sh', ['-c', `exec "$0" "$@" "$(printf '${printed}')"`, process.execPath, CLI, ...args]);
  const { code } = await p.exited;
  return { code, stdout: p.stdout(), stderr: p.stderr() };
}

describe('an id given in bytes that are not UTF-8', () => {
  const hint = 'the argument held bytes that are not UTF-8 (read as U+FFFD): give the id as the listings print it, with \\xHH escapes (caf\\xe9.scc)';

  it('dead-letter retry and requeue say how to give it, beside "unknown"; the id as listed is that item', async () => {
    const ws = workspace(
      { handler: { module: path.join(FIXTURES, 'process/fail-some-module.mjs') }, retry: { maxAttempts: 1 } },
      { 'ok.scc': 'ok' },
    );
    writeFileSync(Buffer.concat([Buffer.from(`${ws.source}/corrupt-caf`), Buffer.from([0xe9]), Buffer.from('.scc')]), 'x');
    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);

    const retry = await withRawId(['dead-letter', 'retry', '-c', ws.configPath]);
    expect(retry.stdout).toContain(`  corrupt-caf\ufffd.scc: unknown (not in the ledger): ${hint}`);
    expect(retry.code).toBe(1);
    const requeue = await withRawId(['requeue', '-c', ws.configPath]);
    expect(requeue.stdout).toContain(`  corrupt-caf\ufffd.scc: unknown (not in the ledger): ${hint}`);
    expect(requeue.code).toBe(1);
    // An id that is simply unknown gets no such note.
    const plain = await runCli(['dead-letter', 'retry', '-c', ws.configPath, 'nope.scc']);
    expect(plain.stdout).toContain('  nope.scc: unknown (not in the ledger)\n');
    // Given as listed, it is that item.
    const listed = await runCli(['dead-letter', 'list', '-c', ws.configPath]);
    expect(listed.stdout.split('\t')[0]).toBe('corrupt-caf\\xe9.scc');
    const asListed = await runCli(['dead-letter', 'retry', '-c', ws.configPath, 'corrupt-caf\\xe9.scc']);
    expect(asListed.stdout).toBe('requeued 1 dead item\n');
    expect(asListed.code).toBe(0);
  }, 60_000);

  // `requeue --glob` so pasted matched nothing and said "requeued 0 items", exit 0: as if
  // there were nothing to redo, while the items it was meant for stayed done.
  it('requeue --glob says it matched nothing because of those bytes (exit 1); given as listed, it selects the item', async () => {
    const ws = workspace({ handler: { command: ['cp', '{path}', '{output}'] } }, { 'ok.scc': 'ok' });
    writeFileSync(Buffer.concat([Buffer.from(`${ws.source}/caf`), Buffer.from([0xe9]), Buffer.from('.scc')]), 'x');
    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);
    const globHint = 'matched no item: it held bytes that are not UTF-8 (read as U+FFFD), so it names none of the items whose names hold such bytes: give it as the listings print their ids, with \\xHH escapes (caf\\xe9*)';

    for (const dry of [['--dry-run'], ['--dry-run', '--json'], []]) {
      const raw = await withRawId(['requeue', '-c', ws.configPath, ...dry, '--glob'], 'caf\\351*');
      expect(raw.stderr, dry.join(' ')).toContain(`cronsafe: requeue: --glob caf\ufffd* ${globHint}`);
      expect(raw.code, dry.join(' ')).toBe(1);
    }
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
    // A glob that matches gets no such note, nor does one in plain UTF-8 that matches nothing.
    const none = await runCli(['requeue', '-c', ws.configPath, '--glob', 'nope*']);
    expect(none.stderr).not.toContain('U+FFFD');
    expect(none.code).toBe(0);
    // Given as listed, it is that item.
    const asListed = await runCli(['requeue', '-c', ws.configPath, '--glob', 'caf\\xe9*']);
    expect(asListed.stdout).toBe('requeued 1 item: pending again, attempts reset\n  caf\\xe9.scc\n');
    expect(asListed.stderr).toBe('');
    expect(asListed.code).toBe(0);
  }, 60_000);
});
