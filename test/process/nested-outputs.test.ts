import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, runCli, spawnCli, statusJson, workspace, type Workspace } from '../helpers/cli.js';

/**
 * Two jobs whose sources overlap (one inside the other) and whose output directories nest
 * the same way: the outer job's item `sub/x` and the inner job's item `x` have one output
 * file, `<outer out>/sub/x.out`. Neither output.directory holds the other's
 * `.cronsafe-tmp/job-<name>`, so the check of a shared directory did not see it, and an
 * output the other job committed was taken for the proof that a killed attempt finished.
 */

const IDS = ['f0.txt', 'f1.txt'];

/** A handler gated on a file: its attempts are in flight when its run is killed; each writes its pid. */
function gated(ws: Workspace): { gate: string; started: string; handler: string } {
  const gate = path.join(ws.dir, 'gate');
  const started = path.join(ws.dir, 'started');
  mkdirSync(started);
  const handler = path.join(ws.dir, 'gated-copy.sh');
  writeFileSync(handler, `#!/bin/sh\necho $$ > "${started}/$(basename "$1")"\nwhile [ ! -e "${gate}" ]; do sleep 0.05; done\ncp "$1" "$2"\n`, { mode: 0o755 });
  return { gate, started, handler };
}

/** Run `ws` until both of its attempts are in flight, then SIGKILL it and its handlers. */
async function killMidAttempt(ws: Workspace, started: string): Promise<void> {
  const run = spawnCli(['run', '-c', ws.configPath], { timeoutMs: 120_000 });
  await run.waitFor((l) => l.msg === 'run started', 30_000);
  for (let i = 0; i < 600 && readdirSync(started).length < IDS.length; i++) await new Promise((r) => setTimeout(r, 50));
  expect(readdirSync(started).sort()).toEqual(IDS);
  run.child.kill('SIGKILL');
  await run.exited;
  for (const f of readdirSync(started)) {
    try {
      process.kill(Number(readFileSync(path.join(started, f), 'utf8')), 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

/** outer: source S, output O; inner: source S/sub, output O/sub (files only in sub/). */
function nestedJobs(): { outer: Workspace; inner: Workspace } {
  const outer = workspace({ name: 'outer', concurrency: 2 }, Object.fromEntries(IDS.map((id) => [`sub/${id}`, `${id}\n`])));
  const inner = workspace({ name: 'inner', concurrency: 2, source: { directory: path.join(outer.source, 'sub') }, output: { directory: path.join(outer.out, 'sub') } });
  return { outer, inner };
}

/** Each handler writes which job ran it, so the output tells whose attempt committed it. */
function tagged(ws: Workspace, tag: string): string[] {
  const h = path.join(ws.dir, 'tagged.sh');
  writeFileSync(h, `#!/bin/sh\necho ${tag} > "$2"\n`, { mode: 0o755 });
  return [h, '{path}', '{output}'];
}

describe('two jobs with nested output directories', () => {
  it("the inner job, killed mid-attempt, does not take the outer job's outputs for its own: its items run again", async () => {
    const { outer, inner } = nestedJobs();
    const g = gated(inner);
    configure(inner, { handler: { command: [g.handler, '{path}', '{output}'] } });
    configure(outer, { handler: { command: tagged(outer, 'outer') } });
    await killMidAttempt(inner, g.started);
    const o = await runCli(['run', '-c', outer.configPath]);
    expect(o.code, o.stderr).toBe(0);
    for (const id of IDS) expect(readFileSync(path.join(outer.out, `sub/${id}.out`), 'utf8')).toBe('outer\n');
    configure(inner, { handler: { command: tagged(inner, 'inner') } });
    const again = await runCli(['run', '-c', inner.configPath]);
    expect(again.code, again.stderr).toBe(0);
    // Before: both recorded done from the outer job's outputs; the inner handler never finished them.
    for (const id of IDS) expect(readFileSync(path.join(outer.out, `sub/${id}.out`), 'utf8')).toBe('inner\n');
    expect((await statusJson(inner.configPath)).items).toMatchObject({ done: 2, dead: 0 });
    const lines = again.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.find((l) => String(l.msg).startsWith('output.directory is shared with other jobs'))?.jobs).toEqual(['outer']);
  }, 150_000);

  it("the outer job, killed mid-attempt, does not take the inner job's outputs for its own: its items run again", async () => {
    const { outer, inner } = nestedJobs();
    const g = gated(outer);
    configure(outer, { handler: { command: [g.handler, '{path}', '{output}'] } });
    configure(inner, { handler: { command: tagged(inner, 'inner') } });
    await killMidAttempt(outer, g.started);
    const i = await runCli(['run', '-c', inner.configPath]);
    expect(i.code, i.stderr).toBe(0);
    for (const id of IDS) expect(readFileSync(path.join(outer.out, `sub/${id}.out`), 'utf8')).toBe('inner\n');
    configure(outer, { handler: { command: tagged(outer, 'outer') } });
    const again = await runCli(['run', '-c', outer.configPath]);
    expect(again.code, again.stderr).toBe(0);
    for (const id of IDS) expect(readFileSync(path.join(outer.out, `sub/${id}.out`), 'utf8')).toBe('outer\n');
    expect((await statusJson(outer.configPath)).items).toMatchObject({ done: 2, dead: 0 });
  }, 150_000);
});
