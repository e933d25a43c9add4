/**
 * An id given on the command line in the raw bytes of a name that is not UTF-8 (pasted from
 * `ls`, or from a shell's completion of the source file): Node reads such an argument with
 * U+FFFD for each foreign byte, so it names no item. `dead-letter retry` and `requeue` said
 * only "unknown (not in the ledger)" of an item the listings show; they now say how to give it.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, FIXTURES, runCli, spawnCliRaw, workspace } from '../helpers/cli.js';

/** The CLI with its last argument made by printf: the raw bytes `corrupt-caf<0xE9>.scc`. */
async function withRawId(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const p = spawnCliRaw('sh', ['-c', 'exec "$0" "$@" "$(printf \'corrupt-caf\\351.scc\')"', process.execPath, CLI, ...args]);
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
});
