/**
 * The state volume full (SQLite; the chart's layout shares it with the outputs): runs fail,
 * and the runbook's first step is `cronsafe status` and `cronsafe dead-letter list`. A
 * clean close leaves a ledger without its `-shm` index, which SQLite makes at the next
 * open, even a read-only one: on a full file system it could not, and every reader
 * (`status`, `dead-letter list`, `plan`, `requeue --dry-run`) failed with "disk I/O error
 * ... has no space left". They only read: they now read the ledger as they do from a
 * read-only directory (no pending write-ahead log: exact). Writers still say the disk is full.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, runCli, workspace } from '../helpers/cli.js';
import { fill } from '../helpers/fill.js';

const isRoot = process.getuid?.() === 0;

describe('operator commands on a full state volume (SQLite)', () => {
  it('status, dead-letter list, plan and requeue --dry-run read the ledger; dead-letter retry says the disk is full', async (ctx) => {
    const ws = workspace({ handler: { command: ['false'] }, retry: { maxAttempts: 1, backoffSeconds: 0 } }, { 'bad.txt': 'x' });
    const volume = path.join(ws.dir, 'volume');
    mkdirSync(volume);
    if (!isRoot || spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', volume]).status !== 0) ctx.skip();
    try {
      configure(ws, { state: { sqlite: path.join(volume, 'cronsafe.db') } });
      expect((await runCli(['run', '-c', ws.configPath])).code).toBe(0);
      fill(path.join(volume, 'filler'));

      const status = await runCli(['status', '--json', '-c', ws.configPath]);
      expect(status.code, status.stderr).toBe(0);
      expect(JSON.parse(status.stdout)).toMatchObject({ items: { pending: 0, claimed: 0, done: 0, dead: 1 } });
      const list = await runCli(['dead-letter', 'list', '--json', '-c', ws.configPath]);
      expect(list.code, list.stderr).toBe(0);
      expect(JSON.parse(list.stdout)).toMatchObject([{ id: 'bad.txt', attempts: 1 }]);
      const plan = await runCli(['plan', '--json', '-c', ws.configPath]);
      expect(plan.code, plan.stderr).toBe(0);
      expect(JSON.parse(plan.stdout)).toMatchObject({ dead: { count: 1 } });
      const dry = await runCli(['requeue', '--all', '--include-dead', '--dry-run', '--json', '-c', ws.configPath]);
      expect(dry.code, dry.stderr).toBe(0);
      expect(JSON.parse(dry.stdout)).toMatchObject({ count: 1, first: ['bad.txt'] });

      const retry = await runCli(['dead-letter', 'retry', '--all', '-c', ws.configPath]);
      expect(retry.code).toBe(1);
      expect(retry.stderr).toContain('has no space left');
    } finally {
      spawnSync('umount', [volume]);
    }
  }, 60_000);
});
