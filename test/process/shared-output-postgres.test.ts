import { mkdirSync, readdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configure, runCli, spawnCli, statusJson, workspace, type Workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';
import { killTree } from '../helpers/proc.js';

/**
 * A PostgreSQL job and an SQLite job on one output.directory, with the same item ids. The
 * PostgreSQL job did not look for other jobs there (its runs each have their own temp
 * directory), so it took the SQLite job's output for the proof that its killed attempt had
 * finished, and recorded the item done without running it again.
 */

const IDS = ['f0.txt', 'f1.txt'];

/** Each handler writes which job ran it, so the output tells whose attempt committed it. */
function tagged(ws: Workspace, tag: string): string[] {
  const h = path.join(ws.dir, 'tagged.sh');
  writeFileSync(h, `#!/bin/sh\necho ${tag} > "$2"\n`, { mode: 0o755 });
  return [h, '{path}', '{output}'];
}

describe.skipIf(PG_SKIP_REASON !== undefined)('a PostgreSQL job sharing output.directory with an SQLite job', () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("does not take the other job's output for the proof that its killed attempt finished: the item runs again", async () => {
    const url = await server.createDatabase('sharedout');
    const files = Object.fromEntries(IDS.map((id) => [id, `${id}\n`]));
    const pgJob = workspace({ name: 'pgjob', concurrency: 2, state: { postgres: url, schema: 'pgjob' }, lease: { seconds: 3, renewSeconds: 1 } }, files);
    const other = workspace({ name: 'other', concurrency: 2, output: { directory: pgJob.out } }, files);
    const started = path.join(pgJob.dir, 'started');
    mkdirSync(started);
    // pgjob's attempts never end by themselves: they are in flight when it is killed.
    const gated = path.join(pgJob.dir, 'hang.sh');
    writeFileSync(gated, `#!/bin/sh\ntouch "${started}/$(basename "$1")"\nexec sleep 600\n`, { mode: 0o755 });
    configure(pgJob, { handler: { command: [gated, '{path}', '{output}'] } });
    configure(other, { handler: { command: tagged(other, 'other') } });
    const run = spawnCli(['run', '-c', pgJob.configPath], { timeoutMs: 120_000 });
    await run.waitFor((l) => l.msg === 'run started', 30_000);
    for (let i = 0; i < 600 && readdirSync(started).length < IDS.length; i++) await new Promise((r) => setTimeout(r, 50));
    expect(readdirSync(started).sort()).toEqual(IDS);
    killTree(run.child.pid!);
    await run.exited;
    const o = await runCli(['run', '-c', other.configPath]);
    expect(o.code, o.stderr).toBe(0);
    for (const id of IDS) expect(readFileSync(path.join(pgJob.out, `${id}.out`), 'utf8')).toBe('other\n');
    // The killed run's claims are taken over once their lease (3 s) has expired: a time, no event to wait for.
    await new Promise((r) => setTimeout(r, 3500));
    configure(pgJob, { handler: { command: tagged(pgJob, 'pgjob') } });
    const again = await runCli(['run', '-c', pgJob.configPath]);
    expect(again.code, again.stderr).toBe(0);
    // Before: both recorded done from the other job's outputs, which stayed.
    for (const id of IDS) expect(readFileSync(path.join(pgJob.out, `${id}.out`), 'utf8')).toBe('pgjob\n');
    expect((await statusJson(pgJob.configPath)).items).toMatchObject({ done: 2, dead: 0 });
    const lines = again.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.find((l) => String(l.msg).startsWith('output.directory is shared with other jobs'))?.jobs).toEqual(['other']);
  }, 150_000);

  it("leaves an SQLite job's ledger mark in .cronsafe-tmp alone: a copy of that job on another ledger is still told", async () => {
    const url = await server.createDatabase('sharedmark');
    const files = Object.fromEntries(IDS.map((id) => [id, `${id}\n`]));
    const pgJob = workspace({ name: 'pgjob', state: { postgres: url, schema: 'pgjob' } }, files);
    // Two configs of one name, each on its own ledger, writing where the PostgreSQL job writes.
    const [first, copy] = [0, 1].map(() => workspace({ name: 'same', output: { directory: pgJob.out }, handler: { command: ['cp', '{path}', '{output}'] }, log: { level: 'info' } }, files));
    configure(pgJob, { handler: { command: tagged(pgJob, 'pgjob') } });
    const r1 = await runCli(['run', '-c', first!.configPath]);
    expect(r1.code, r1.stderr).toBe(0);
    const tmp = path.join(pgJob.out, '.cronsafe-tmp');
    const marks = readdirSync(tmp).filter((e) => e.startsWith('job-same.ledger-'));
    expect(marks).toHaveLength(1);
    // Made a day ago: older than a PostgreSQL run's stale temp directories (its owner's run died).
    const dayAgo = new Date(Date.now() - 86_400_000);
    utimesSync(path.join(tmp, marks[0]!), dayAgo, dayAgo);
    const p = await runCli(['run', '-c', pgJob.configPath]);
    expect(p.code, p.stderr).toBe(0);
    expect(readdirSync(tmp)).toContain(marks[0]);
    const r2 = await runCli(['run', '-c', copy!.configPath]);
    expect(r2.code, r2.stderr).toBe(0);
    // Before: the PostgreSQL run removed the mark as a dead run's directory, and the copy said nothing.
    expect(r2.lines.find((l) => l.msg?.startsWith('output.directory was last written by a job named'))).toMatchObject({ level: 'warn', ledger: copy!.db });
  }, 60_000);
});
