import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURES, runCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';
import { PUSHGATEWAY, scrape, startPushgateway, value, type Server } from '../helpers/prom.js';

const copy = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];

// A CronJob's runs push to one Pushgateway group, each replacing the last. The handler-time
// histogram was counted in each process from zero, so the group's _count went 2 (first run's
// two attempts) -> 2 (the second run's two): no reset for Prometheus to see (it only sees one
// where a value goes down) and no rise, so rate() and the dashboard's handler-time panels
// counted nothing for the second run, or a difference of two runs' numbers. Kept in the
// ledger, like every other counter, the group's histogram keeps counting across runs.
describe.skipIf(PUSHGATEWAY === undefined)('the handler-time histogram pushed by short runs', () => {
  let gateway: Server;
  let pg: PgServer | undefined;
  beforeAll(async () => {
    gateway = await startPushgateway();
    if (PG_SKIP_REASON === undefined) pg = await startPostgres();
  });
  afterAll(async () => {
    await gateway?.stop();
    await pg?.stop();
  });

  it('keeps counting across runs in the Pushgateway group (never back to the last run alone)', async () => {
    await twoRuns({});
  }, 60_000);

  it.skipIf(PG_SKIP_REASON !== undefined)('keeps counting across runs on PostgreSQL too', async () => {
    await twoRuns({ name: 'pg-job', state: { postgres: await pg!.createDatabase('handler_times'), schema: 'handler_times' } });
  }, 90_000);

  async function twoRuns(config: Record<string, unknown>): Promise<void> {
    const ws = workspace({ handler: { command: copy }, metrics: { pushgateway: gateway.url }, ...config }, { 'a.txt': 'a', 'b.txt': 'b' });
    const first = await runCli(['run', '-c', ws.configPath]);
    expect(first.code, first.stderr).toBe(0);
    const afterFirst = await scrape(gateway.url);
    const job = { job: (config.name as string | undefined) ?? 'test-job', result: 'succeeded' };
    expect(value(afterFirst, 'cronsafe_item_duration_seconds_count', job)).toBe(2);
    const sumFirst = value(afterFirst, 'cronsafe_item_duration_seconds_sum', job);

    writeFileSync(path.join(ws.source, 'c.txt'), 'c');
    writeFileSync(path.join(ws.source, 'd.txt'), 'd');
    const second = await runCli(['run', '-c', ws.configPath]);
    expect(second.code, second.stderr).toBe(0);
    const afterSecond = await scrape(gateway.url);
    expect(value(afterSecond, 'cronsafe_items_processed_total', job)).toBe(4);
    expect(value(afterSecond, 'cronsafe_item_duration_seconds_count', job)).toBe(4);
    expect(value(afterSecond, 'cronsafe_item_duration_seconds_bucket', { ...job, le: '+Inf' })).toBe(4);
    expect(value(afterSecond, 'cronsafe_item_duration_seconds_sum', job)).toBeGreaterThan(sumFirst);
  }
});
