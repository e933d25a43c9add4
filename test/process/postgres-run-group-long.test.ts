import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, statusJson, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';

/** `n` characters that do not compress (a fixed pseudo-random sequence: the test means the same each time). */
function incompressible(n: number, seed: number): string {
  const abc = 'abcdefghijklmnopqrstuvwxyz0123456789';
  let x = seed;
  let s = '';
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    s += abc[x % abc.length];
  }
  return s;
}

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a run group too long for the pending index', () => {
  const pg = usePostgresDatabase('rungrouplong', 90_000);

  it('is refused with exit 78 naming the variable (with an id under 2,048 bytes, every run failed with exit 1 and nothing was done)', async () => {
    // 9 directories of 200 characters: an id of 1,814 bytes, under the 2,048 that always fit.
    const deep = Array.from({ length: 9 }, (_, i) => incompressible(200, i + 1)).join('/');
    const ws = workspace({ handler: { command: ['true'] }, state: { postgres: pg.url, schema: 'rgl' } }, { 'a.txt': 'a', 'b.txt': 'b' });
    mkdirSync(path.join(ws.source, deep), { recursive: true });
    writeFileSync(path.join(ws.source, deep, 'f.txt'), 'deep');
    const long = incompressible(900, 99);
    for (const variable of ['CRONSAFE_RUN_GROUP', 'JOB_NAME']) {
      const r = await runCli(['run', '-c', ws.configPath], { env: { [variable]: long } });
      expect(r.code, r.stderr).toBe(78);
      expect(r.stderr.trim()).toBe(`cronsafe: ${variable}: a run group of at most 255 bytes, got 900: the ledger's index of pending items holds it beside each item's id; give a shorter name`);
      expect(r.lines.map((l) => l.msg)).not.toContain('run started');
    }
    // At the bound, and the usual Job name: the whole backlog, the long id included.
    const ok = await runCli(['run', '-c', ws.configPath], { env: { CRONSAFE_RUN_GROUP: incompressible(255, 7) } });
    expect(ok.code, ok.stderr).toBe(0);
    expect((await statusJson(ws.configPath)).items.done).toBe(3);
  }, 90_000);
});
