/**
 * More pods than the server's connection slots (docs/postgres.md, Setup: "Size
 * max_connections ... for parallelism x 7: past it, the pods that cannot connect retry
 * 53300 ... then stop their pass (exit 1; nothing is lost, the others finish the work)").
 * Five pods of one run group as a plain role on a server with 12 slots for it: each pod
 * exits 0 or 1, a pod that gives up names 53300 and host:port (never the password), and
 * every item ends done, none left claimed. Real server, real processes, default retry
 * settings.
 */
import { readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnCli, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

const PASSWORD = 'Slots-Pw-7f3a9c';
/** ~60 ms of waiting per item (like I/O), then an output. */
const IO_HANDLER = `import { writeFile } from 'node:fs/promises';
export default async function io(item, ctx) {
  await new Promise((resolve, reject) => {
    const t = setTimeout(resolve, 60);
    ctx.signal?.addEventListener('abort', () => { clearTimeout(t); reject(new Error('aborted')); }, { once: true });
  });
  await writeFile(ctx.outputPath, 'ok');
}
`;

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: more pods than connection slots', () => {
  let server: PgServer;
  beforeAll(async () => {
    // 15 - 3 reserved for superusers: 12 slots for the role, fewer than 5 pods need.
    server = await startPostgres({ settings: { max_connections: '15', superuser_reserved_connections: '3' } });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('5 pods, 12 slots: pods exit 0 or 1 (53300, no password), every item is done, none left claimed', async () => {
    const ITEMS = 2000;
    await server.createDatabase('slots');
    await server.admin(`CREATE ROLE app LOGIN PASSWORD '${PASSWORD}'`);
    await server.admin(`ALTER DATABASE slots OWNER TO app`);
    const url = `postgres://app:${PASSWORD}@127.0.0.1:${server.port}/slots`;
    const files = Object.fromEntries(Array.from({ length: ITEMS }, (_, i) => [`d${i % 10}/item-${i}.txt`, String(i)]));
    const ws = workspace({ handler: { module: 'handler.mjs' }, state: { postgres: url, schema: 'slots' }, log: { level: 'info' } }, files);
    writeFileSync(path.join(ws.dir, 'handler.mjs'), IO_HANDLER);
    const env = { CRONSAFE_RUN_GROUP: 'slots' };
    const pods = Array.from({ length: 5 }, () => spawnCli(['run', '-c', ws.configPath], { env, timeoutMs: 280_000 }));
    const exits = await Promise.all(pods.map((p) => p.exited));

    const where = `127.0.0.1:${server.port}/slots as app`;
    let sawFull = false;
    for (const [i, p] of pods.entries()) {
      const out = p.stderr() + p.stdout();
      expect(out, `pod ${i}`).not.toContain(PASSWORD);
      if (out.includes('[53300]')) sawFull = true;
      expect([0, 1], `pod ${i}: ${p.stderr().slice(-800)}`).toContain(exits[i]!.code);
      if (exits[i]!.code === 1) {
        expect(p.stderr(), `pod ${i}`).toContain('[53300]');
        expect(p.stderr(), `pod ${i}`).toContain(where);
      }
    }
    // The test means something only if the server was full.
    expect(sawFull).toBe(true);
    expect(exits.some((e) => e.code === 0)).toBe(true);
    const rows = await server.admin<{ state: string; n: number }>(`SELECT state, count(*)::int AS n FROM slots.items GROUP BY state`, [], 'slots');
    expect(rows).toEqual([{ state: 'done', n: ITEMS }]);
    const outputs = readdirSync(ws.out, { recursive: true, withFileTypes: true }).filter((d) => d.isFile() && d.name.endsWith('.out'));
    expect(outputs.length).toBe(ITEMS);
  }, 300_000);
});
