/**
 * An id given as a path: the file's absolute path (from `find`, a file browser, the source
 * directory reached through a link) or `./name` typed in the source directory. Ids are
 * relative to source.directory, so such an argument names no item; `dead-letter retry` and
 * `requeue` said only "unknown (not in the ledger)" of an item the listings show. They now say
 * ids are relative to source.directory and give the id the path means (or that it is outside).
 */
import { symlinkSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, runCli, workspace } from '../helpers/cli.js';

describe('an id given as a path', () => {
  it('dead-letter retry and requeue give the id the path means; the id so given is that item', async () => {
    const ws = workspace(
      { handler: { module: path.join(FIXTURES, 'process/fail-some-module.mjs') }, retry: { maxAttempts: 1 } },
      { 'corrupt-a.scc': 'x', 'sub/corrupt-b.scc': 'x' },
    );
    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);
    const where = `ids are relative to source.directory (${ws.source})`;

    const link = path.join(ws.dir, 'queue-link');
    symlinkSync(ws.source, link);
    const retry = await runCli(['dead-letter', 'retry', '-c', ws.configPath, path.join(ws.source, 'corrupt-a.scc'), path.join(link, 'sub/corrupt-b.scc'), '/etc/passwd']);
    expect(retry.stdout).toBe(
      [
        'requeued 0 dead items',
        '3 of the given ids were not dead letters:',
        `  ${path.join(ws.source, 'corrupt-a.scc')}: unknown (not in the ledger): ${where}: give corrupt-a.scc`,
        `  ${path.join(link, 'sub/corrupt-b.scc')}: unknown (not in the ledger): ${where}: give sub/corrupt-b.scc`,
        `  /etc/passwd: unknown (not in the ledger): ${where}, and this path (from the working directory) is outside it`,
        '',
      ].join('\n'),
    );
    expect(retry.code).toBe(1);

    // `./name` in the source directory, as a shell's completion writes it.
    const requeue = await runCli(['requeue', '-c', ws.configPath, '--include-dead', './corrupt-a.scc'], { cwd: ws.source });
    expect(requeue.stdout).toContain(`  ./corrupt-a.scc: unknown (not in the ledger): ${where}: give corrupt-a.scc\n`);
    expect(requeue.code).toBe(1);
    // An id that is simply unknown gets no such note.
    const plain = await runCli(['requeue', '-c', ws.configPath, '--include-dead', 'nope.scc']);
    expect(plain.stdout).toContain('  nope.scc: unknown (not in the ledger)\n');
    // A bare path from the source's parent (`<source>/a`, as ls or a shell's completion gives
    // it there), or from anywhere to source.directory's parent: before, only "unknown".
    const src = path.basename(ws.source);
    const bare = await runCli(['requeue', '-c', ws.configPath, '--include-dead', `${src}/corrupt-a.scc`, `${src}/sub/corrupt-b.scc`, `${src}/nope.scc`], { cwd: path.dirname(ws.source) });
    expect(bare.stdout).toContain(`  ${src}/corrupt-a.scc: unknown (not in the ledger): ${where}: did you mean corrupt-a.scc?\n`);
    expect(bare.stdout).toContain(`  ${src}/sub/corrupt-b.scc: unknown (not in the ledger): ${where}: did you mean sub/corrupt-b.scc?\n`);
    expect(bare.stdout).toContain(`  ${src}/nope.scc: unknown (not in the ledger)\n`); // names no known item: no guess
    expect(bare.code).toBe(1);
    const fromElsewhere = await runCli(['requeue', '-c', ws.configPath, '--include-dead', `${src}/corrupt-a.scc`], { cwd: ws.source });
    expect(fromElsewhere.stdout).toContain(`: did you mean corrupt-a.scc?\n`);

    // The id given is that item.
    const given = await runCli(['dead-letter', 'retry', '-c', ws.configPath, 'corrupt-a.scc', 'sub/corrupt-b.scc']);
    expect(given.stdout).toBe('requeued 2 dead items\n');
    expect(given.code).toBe(0);
  }, 60_000);

  it('a path longer than any file may have is only unknown: no crash, no minutes spent', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/fail-some-module.mjs') }, retry: { maxAttempts: 1 } }, { 'corrupt-a.scc': 'x' });
    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);
    // Pasted by mistake (a deep `find` line, a buffer): 60,000 directories that do not exist,
    // outside the source, followed a directory at a time through links: the stack overflowed.
    const long = `./${'a/'.repeat(60_000)}x.scc`;
    const retry = await runCli(['dead-letter', 'retry', '-c', ws.configPath, long, 'corrupt-a.scc'], { cwd: ws.dir });
    expect(retry.stderr).not.toContain('fatal');
    expect(retry.stdout).toContain(`  ${long}: unknown (not in the ledger)\n`);
    expect(retry.stdout.startsWith('requeued 1 dead item'), retry.stdout).toBe(true);
    expect(retry.code).toBe(1);
  }, 60_000);
});
