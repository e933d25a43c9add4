import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, finished, runCli, statusJson, workspace } from '../helpers/cli.js';

describe('poison items are dead-lettered and stop being claimed', () => {
  it('always-failing item: dead after maxAttempts with its last error; later runs skip it; retry requeues it', async () => {
    const ws = workspace(
      {
        handler: { module: path.join(FIXTURES, 'process/fail-some-module.mjs') },
        retry: { maxAttempts: 3, backoffSeconds: 0, backoffMaxSeconds: 0 },
      },
      { 'good-1.scc': '1', 'corrupt.scc': 'x', 'good-2.scc': '2' },
    );
    const first = await runCli(['run', '-c', ws.configPath]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.lines.filter((l) => l.msg === 'item failed; will retry')).toHaveLength(2);
    const deadLine = first.lines.find((l) => l.msg === 'item dead-lettered');
    expect(deadLine).toMatchObject({ itemId: 'corrupt.scc', attempt: 3 });
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 1 });

    const list = await runCli(['dead-letter', 'list', '-c', ws.configPath, '--json']);
    const dead = JSON.parse(list.stdout) as Array<{ id: string; attempts: number; lastError: string }>;
    expect(dead).toHaveLength(1);
    expect(dead[0]).toMatchObject({ id: 'corrupt.scc', attempts: 3 });
    expect(dead[0]!.lastError).toContain('corrupt caption file: corrupt.scc');

    // A later run does not touch it.
    const second = await runCli(['run', '-c', ws.configPath]);
    expect(finished(second)?.counts).toMatchObject({ claimed: 0, failed: 0, deadLettered: 0 });

    const retry = await runCli(['dead-letter', 'retry', '-c', ws.configPath, '--all']);
    expect(retry.stdout).toContain('requeued 1 dead item');
    expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 1, dead: 0 });
    const third = await runCli(['run', '-c', ws.configPath]);
    expect(finished(third)?.counts).toMatchObject({ claimed: 3, deadLettered: 1 });
  });

  it('dead-letter retry of a dead id given twice (xargs over a list with repeats) requeues it and exits 0', async () => {
    const ws = workspace(
      { handler: { module: path.join(FIXTURES, 'process/fail-some-module.mjs') }, retry: { maxAttempts: 1 } },
      { 'good.scc': 'g', 'corrupt.scc': 'x' },
    );
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ dead: 1 });
    const r = await runCli(['dead-letter', 'retry', '-c', ws.configPath, 'corrupt.scc', 'corrupt.scc']);
    expect(r.stdout).toBe('requeued 1 dead item\n');
    expect(r.code, r.stdout).toBe(0);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 1, dead: 0 });
  });

  it('dead-letter retry names each given id it did not requeue, and why', async () => {
    const ws = workspace(
      { handler: { module: path.join(FIXTURES, 'process/fail-some-module.mjs') }, retry: { maxAttempts: 1 } },
      { 'good.scc': 'g', 'corrupt.scc': 'x' },
    );
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    const r = await runCli(['dead-letter', 'retry', '-c', ws.configPath, 'corrupt.scc', 'good.scc', 'nope.scc', 'new\nline.scc']);
    expect(r.code, r.stdout).toBe(1);
    expect(r.stdout).toBe(
      [
        'requeued 1 dead item',
        '3 of the given ids were not dead letters:',
        '  good.scc: done (not dead)',
        '  nope.scc: unknown (not in the ledger)',
        '  "new\\nline.scc": unknown (not in the ledger)',
        '',
      ].join('\n'),
    );
    expect((await statusJson(ws.configPath)).items).toMatchObject({ pending: 1, done: 1, dead: 0 });
  });

  it('dead-letter retry of an id that is not dead says so and exits 1', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/fail-some-module.mjs') } }, { 'a.scc': 'a' });
    // A ledger that exists (without one, retry refuses as requeue does: state-access.test.ts).
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    const r = await runCli(['dead-letter', 'retry', '-c', ws.configPath, 'nope.scc']);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('1 of the given ids was not a dead letter:');
    const usage = await runCli(['dead-letter', 'retry', '-c', ws.configPath]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('dead-letter retry: no item ids given (give one or more ids, or --all)');
    expect(usage.stderr).toContain('Usage: cronsafe dead-letter retry [options] [ids...]');
    // Ids and --all together would requeue everything: refused, nothing moved.
    const both = await runCli(['dead-letter', 'retry', '-c', ws.configPath, '--all', 'a.scc']);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('give item ids or --all, not both');
  });
});
