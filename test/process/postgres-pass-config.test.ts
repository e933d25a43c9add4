/**
 * PostgreSQL: the pods of one run group share one pass, so they must scan alike. A pod
 * started with another source.directory, include or exclude (a `helm upgrade` that changed
 * the ConfigMap while the Job's pods ran, pods of one Job started minutes apart) joined the
 * pass all the same: with another directory it claimed its siblings' items, found no file
 * under its own directory and forgot them as gone; with another include, its end of scan
 * deleted pending rows of earlier passes that its siblings' scan had not marked yet, and
 * their attempt counts with them (the file came back as a new item, attempt 1 again). Now
 * such a pod is refused before it joins (exit 78 naming the keys) and touches nothing.
 * Real processes, a real server, default retry settings.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { filesIn, until } from '../helpers/wait.js';
import { spawnCli, workspace, type Running, type Workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, startPostgres, type PgServer } from '../helpers/postgres.js';

/**
 * Fails items named *.dat. With HOLD_IMPORT its import waits for the file $GATE (a pod that
 * has taken the run lock and not begun its scan); with HOLD_ITEMS each attempt waits for it.
 */
const HANDLER = `import { existsSync, writeFileSync } from 'node:fs';
const gate = async () => { while (!existsSync(process.env.GATE)) await new Promise((r) => setTimeout(r, 25)); };
if (process.env.HOLD_IMPORT) await gate();
export default async function h(item, ctx) {
  if (process.env.HOLD_ITEMS) await gate();
  if (item.id.endsWith('.dat')) throw new Error('bad item');
  writeFileSync(ctx.outputPath, 'ok');
}
`;

/** A second config for the workspace's job: its own file, the same job, with `patch` applied. */
function otherConfig(ws: Workspace, file: string, patch: (c: Record<string, Record<string, unknown>>) => void): string {
  const c = YAML.parse(readFileSync(ws.configPath, 'utf8')) as Record<string, Record<string, unknown>>;
  patch(c);
  const p = path.join(ws.dir, file);
  writeFileSync(p, YAML.stringify(c));
  return p;
}

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: a pod whose config differs from its run group\'s pass does not join it', () => {
  let server: PgServer;
  const running: Running[] = [];
  const spawn = (args: string[], env: NodeJS.ProcessEnv): Running => {
    const r = spawnCli(args, { env, timeoutMs: 90_000 });
    running.push(r);
    return r;
  };
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    for (const r of running) if (r.child.exitCode === null) r.child.kill('SIGKILL');
    await server?.stop();
  });

  const rows = (db: string, schema: string) => server.admin<{ id: string; state: string; attempts: number }>(`SELECT id, state, attempts FROM ${schema}.items ORDER BY id`, [], db);

  it('another source.directory: refused with exit 78 naming it; its siblings\' items are not forgotten as gone', async () => {
    const N = 6;
    const url = await server.createDatabase('cfgdir');
    const files = Object.fromEntries(Array.from({ length: N }, (_, i) => [`item-${i}.txt`, String(i)]));
    const ws = workspace({ handler: { module: 'handler.mjs' }, state: { postgres: url, schema: 'cfgdir' }, concurrency: 1, log: { level: 'info' } }, files);
    writeFileSync(path.join(ws.dir, 'handler.mjs'), HANDLER);
    const gate = path.join(ws.dir, 'gate');
    const elsewhere = path.join(ws.dir, 'elsewhere');
    mkdirSync(elsewhere);
    const other = otherConfig(ws, 'other.yaml', (c) => {
      c.source = { ...c.source, directory: elsewhere };
      c.handler = { module: path.join(ws.dir, 'handler.mjs') };
    });
    const env = { CRONSAFE_RUN_GROUP: 'cfg-dir', GATE: gate };

    // A started the pass: it scanned every item and holds one, its attempt waiting (the new
    // items it has not claimed are recorded by the claims that take them, so only that one is
    // in the ledger yet).
    const a = spawn(['run', '-c', ws.configPath], { ...env, HOLD_ITEMS: '1' });
    await until(async () => {
      const r = await rows('cfgdir', 'cfgdir').catch(() => []);
      return r.some((x) => x.state === 'claimed');
    }, "A's first claim", 30_000);
    const recorded = await rows('cfgdir', 'cfgdir');

    // B: the same job and group, another source.directory.
    const b = spawn(['run', '-c', other], env);
    await until(async () => b.child.exitCode !== null || (await rows('cfgdir', 'cfgdir')).length < recorded.length, 'B to exit, or to forget items', 30_000);
    expect(await rows('cfgdir', 'cfgdir'), `B forgot A's items; B's stderr: ${b.stderr()}`).toEqual(recorded);
    const eb = await b.exited;
    expect(eb.code, b.stderr()).toBe(78);
    expect(b.stderr()).toContain('source.directory: not the same as in the pass its run group "group:cfg-dir" is running');
    expect(b.stderr()).toContain(`source.directory here ${JSON.stringify(elsewhere)}, in the pass ${JSON.stringify(ws.source)}`);
    expect(b.stderr()).toContain('claimed, forgot or reset nothing');

    // A finishes the pass alone: every item done once.
    writeFileSync(gate, '');
    const ea = await a.exited;
    expect(ea.code, a.stderr()).toBe(0);
    expect((await rows('cfgdir', 'cfgdir')).map((r) => r.state)).toEqual(Array(N).fill('done'));
    expect(filesIn(ws.out).filter((f) => f.endsWith('.out'))).toHaveLength(N);
  }, 120_000);

  it('another source.include: refused; a pending item of an earlier pass keeps its attempts', async () => {
    const url = await server.createDatabase('cfginc');
    const ws = workspace(
      { handler: { module: 'handler.mjs' }, state: { postgres: url, schema: 'cfginc' }, log: { level: 'info' } },
      { 'a.txt': 'a', 'b.txt': 'b', 'x.dat': 'x' },
    );
    writeFileSync(path.join(ws.dir, 'handler.mjs'), HANDLER);
    const gate = path.join(ws.dir, 'gate');

    // An earlier pass: x.dat failed once, pending for its backoff (retry's defaults).
    const first = spawn(['run', '-c', ws.configPath], { CRONSAFE_RUN_GROUP: 'earlier', GATE: gate });
    expect((await first.exited).code, first.stderr()).toBe(0);
    const xdat = async () => (await rows('cfginc', 'cfginc')).find((r) => r.id === 'x.dat');
    expect(await xdat()).toMatchObject({ state: 'pending', attempts: 1 });

    const narrow = otherConfig(ws, 'narrow.yaml', (c) => {
      c.source = { ...c.source, include: ['*.txt'] };
      c.handler = { module: path.join(ws.dir, 'handler.mjs') };
    });
    const env = { CRONSAFE_RUN_GROUP: 'cfg-inc', GATE: gate };
    // A starts the pass and holds before its scan (its handler's import waits).
    const a = spawn(['run', '-c', ws.configPath], { ...env, HOLD_IMPORT: '1' });
    await a.waitFor((l) => l.msg === 'run lock taken (PostgreSQL advisory lock)', 30_000);
    // B, with only *.txt included, comes to the same pass.
    const b = spawn(['run', '-c', narrow], env);
    const eb = await b.exited;
    expect(await xdat(), `B forgot x.dat; B's stderr: ${b.stderr()}`).toMatchObject({ state: 'pending', attempts: 1 });
    expect(eb.code, b.stderr()).toBe(78);
    expect(b.stderr()).toContain('source.include: not the same as in the pass its run group "group:cfg-inc" is running');
    expect(b.stderr()).toContain('source.include here ["*.txt"], in the pass ["**"]');

    writeFileSync(gate, '');
    const ea = await a.exited;
    expect(ea.code, a.stderr()).toBe(0);
    // x.dat is still the item that failed once (its backoff not over): not a new one.
    expect(await xdat()).toMatchObject({ state: 'pending', attempts: 1 });
  }, 120_000);
});
