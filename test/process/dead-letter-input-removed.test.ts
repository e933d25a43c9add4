/**
 * What CronsafeDeadLetters tells an operator to do with a dead item whose input is bad:
 * removing the input alone leaves the item dead (runs never forget dead items, whatever
 * their age), so the alert stays on; `dead-letter retry` then lets the next run forget it.
 * The rule's description said "retry them or remove their inputs", as if either cleared it.
 * (The rule's text is checked by promtool: deploy/prometheus/cronsafe-rules.test.yaml.)
 */
import { rmSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, runCli, statusJson, workspace } from '../helpers/cli.js';

describe('a dead item whose input is deleted', () => {
  it('stays dead through later runs until dead-letter retry; then the next run forgets it (gone) and the dead count is 0', async () => {
    const ws = workspace({ handler: { module: path.join(FIXTURES, 'process/fail-some-module.mjs') }, retry: { maxAttempts: 1 } }, { 'corrupt.scc': 'x', 'ok.scc': 'ok' });
    expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ done: 1, dead: 1 });

    rmSync(path.join(ws.source, 'corrupt.scc'));
    const after = await runCli(['run', '-c', ws.configPath]);
    expect(after.code, after.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items).toMatchObject({ done: 1, dead: 1 });
    expect((await runCli(['dead-letter', 'list', '-c', ws.configPath])).stdout).toMatch(/^corrupt\.scc\tattempts 1\t/);

    const retry = await runCli(['dead-letter', 'retry', '-c', ws.configPath, 'corrupt.scc']);
    expect(retry.code, retry.stdout + retry.stderr).toBe(0);
    expect(retry.stdout).toBe('requeued 1 dead item\n');
    const next = await runCli(['run', '-c', ws.configPath]);
    expect(next.code, next.stderr).toBe(0);
    expect(next.lines.find((l) => /^forgot pending items whose files are gone/.test(l.msg))).toMatchObject({ items: 1 });
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
    expect((await runCli(['dead-letter', 'list', '-c', ws.configPath])).stdout).toBe('no dead letters\n');
  }, 60_000);
});
