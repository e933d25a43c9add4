import { utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import type { Ledger } from '../../src/ledger/types.js';
import { runPass } from '../../src/runner/pass.js';
import type { Handler } from '../../src/runner/types.js';
import { workspace } from '../helpers/cli.js';
import { memoryLogger } from '../helpers/log.js';

const open: Ledger[] = [];
afterEach(async () => {
  for (const l of open.splice(0)) await l.close();
});

async function passOver(refreshMode: 'never' | 'every-occurrence' | 'on-change') {
  const ws = workspace(
    { handler: { command: ['true'] }, schedule: { cron: '0 * * * *', timeZone: 'UTC', refresh: refreshMode } },
    { 'a.txt': 'a', 'b.txt': 'b' },
  );
  const config = loadConfig(ws.configPath);
  const ledger = await openSqliteLedger(ws.db);
  open.push(ledger);
  const seen: string[] = [];
  const handler: Handler = { run: async (item) => void seen.push(item.id) };
  const never = new AbortController().signal;
  let n = 0;
  const pass = async (refresh?: { doneBefore?: number; onChange?: boolean }) => {
    seen.length = 0;
    const { log } = memoryLogger('warn');
    await runPass({ config, ledger, handler, log, runId: `run-${++n}`, owner: `o-${n}`, stop: never, force: never, refresh });
    return [...seen].sort();
  };
  return { ws, pass };
}

describe('refresh policies through a real scan', () => {
  it('never: done is final, new files are picked up', async () => {
    const { ws, pass } = await passOver('never');
    expect(await pass()).toEqual(['a.txt', 'b.txt']);
    writeFileSync(path.join(ws.source, 'c.txt'), 'c');
    expect(await pass()).toEqual(['c.txt']);
  });

  it('every-occurrence: items done before the occurrence are redone; within it, the sweep continues', async () => {
    const { pass } = await passOver('every-occurrence');
    expect(await pass({ doneBefore: Date.now() })).toEqual(['a.txt', 'b.txt']);
    const sameOccurrence = Date.now() - 60_000; // both were done after it
    expect(await pass({ doneBefore: sameOccurrence })).toEqual([]);
    expect(await pass({ doneBefore: Date.now() + 1 })).toEqual(['a.txt', 'b.txt']); // a new occurrence
  });

  it('on-change: only items whose size or mtime changed since they were processed are redone', async () => {
    const { ws, pass } = await passOver('on-change');
    expect(await pass({ onChange: true })).toEqual(['a.txt', 'b.txt']);
    expect(await pass({ onChange: true })).toEqual([]);
    writeFileSync(path.join(ws.source, 'a.txt'), 'a changed');
    const later = new Date(Date.now() + 5000);
    utimesSync(path.join(ws.source, 'b.txt'), later, later);
    expect(await pass({ onChange: true })).toEqual(['a.txt', 'b.txt']);
    expect(await pass({ onChange: true })).toEqual([]);
  });
});
