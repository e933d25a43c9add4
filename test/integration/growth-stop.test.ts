import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { openSqliteLedger } from '../../src/ledger/sqlite/index.js';
import type { Ledger } from '../../src/ledger/types.js';
import { sourceGrew } from '../../src/run/daemon.js';
import { workspace } from '../helpers/cli.js';

const open: Ledger[] = [];
afterEach(async () => {
  for (const l of open.splice(0)) await l.close();
});

async function setup() {
  const ws = workspace({ handler: { command: ['true'] }, schedule: { cron: '0 * * * *', timeZone: 'UTC' }, daemon: { growth: { enabled: true } } }, { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' });
  const ledger = await openSqliteLedger(ws.db);
  open.push(ledger);
  return { config: loadConfig(ws.configPath), ledger };
}

describe("the daemon's growth check (sourceGrew)", () => {
  it('sees files the ledger has not', async () => {
    const { config, ledger } = await setup();
    expect(await sourceGrew(config, ledger, (read) => read, new AbortController().signal)).toBe(true);
  });

  it('a stop (SIGTERM) during the check ends it with false: no pass starts and the scan does not hold the daemon', async () => {
    const { config, ledger } = await setup();
    const stop = new AbortController();
    let reads = 0;
    const grew = await sourceGrew(
      config,
      ledger,
      (read) => {
        reads++;
        stop.abort(); // SIGTERM arrives while the check reads the ledger's counts
        return read;
      },
      stop.signal,
    );
    expect(grew).toBe(false);
    expect(reads).toBe(1); // the counts only: no batch of ids was looked up after the stop
  });
});
