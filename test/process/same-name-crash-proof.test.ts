import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, runCli, spawnCli, statusJson, workspace, type Workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

/**
 * Two configs of one name on two ledgers (a copy that kept the name, with its own source and
 * default ledger) and one output directory, run one after the other. The first is killed
 * with attempts in flight; the copy then commits outputs for the same ids. Crash recovery
 * took those outputs (born after the claims) for the proof that the killed attempts
 * finished, and recorded the first job's items done though its handler never finished them:
 * it skips proofs when another job's name is found there, but a copy of the same name is told
 * only by the ledger mark, which the start read after the recovery.
 */

const IDS = ['f0.txt', 'f1.txt'];

/** A handler gated on a file: its attempts are in flight when its run is killed; each writes its pid. */
function gated(ws: Workspace): { started: string; handler: string } {
  const started = path.join(ws.dir, 'started');
  mkdirSync(started);
  const handler = path.join(ws.dir, 'gated-copy.sh');
  writeFileSync(handler, `#!/bin/sh\necho $$ > "${started}/$(basename "$1")"\nwhile [ ! -e "${ws.dir}/gate" ]; do sleep 0.05; done\ncp "$1" "$2"\n`, { mode: 0o755 });
  return { started, handler };
}

/** Each handler writes which config ran it, so the output tells whose attempt committed it. */
function tagged(ws: Workspace, tag: string): string[] {
  const h = path.join(ws.dir, 'tagged.sh');
  writeFileSync(h, `#!/bin/sh\necho ${tag} > "$2"\n`, { mode: 0o755 });
  return [h, '{path}', '{output}'];
}

describe('two configs of one name on two ledgers, one output directory, a crash between', () => {
  it("the killed one does not take the copy's outputs for its own: its items run again", async () => {
    const files = Object.fromEntries(IDS.map((id) => [id, `${id}\n`]));
    const first = workspace({ name: 'same-name', concurrency: 2, log: { level: 'info' } }, files);
    const copy = workspace({ name: 'same-name', log: { level: 'info' } }, files);
    configure(copy, { output: { directory: first.out }, handler: { command: tagged(copy, 'copy') } });
    const g = gated(first);
    configure(first, { handler: { command: [g.handler, '{path}', '{output}'] } });

    const run = spawnCli(['run', '-c', first.configPath], { timeoutMs: 120_000 });
    await run.waitFor((l) => l.msg === 'run started', 30_000);
    await until(() => readdirSync(g.started).length === IDS.length, 'both attempts of the first config in flight', 60_000);
    run.child.kill('SIGKILL');
    await run.exited;
    for (const f of readdirSync(g.started)) {
      try {
        process.kill(Number(readFileSync(path.join(g.started, f), 'utf8')), 'SIGKILL');
      } catch {
        // already gone
      }
    }

    const c = await runCli(['run', '-c', copy.configPath]);
    expect(c.code, c.stderr).toBe(0);
    for (const id of IDS) expect(readFileSync(path.join(first.out, `${id}.out`), 'utf8')).toBe('copy\n');

    configure(first, { handler: { command: tagged(first, 'first') } });
    const again = await runCli(['run', '-c', first.configPath]);
    expect(again.code, again.stderr).toBe(0);
    // Before: both recorded done from the copy's outputs (doneByOutput 2); the handler never ran again.
    expect(again.lines.find((l) => l.msg.startsWith('reclaimed claims left by a run that died'))).toMatchObject({ orphans: 2, doneByOutput: 0 });
    for (const id of IDS) expect(readFileSync(path.join(first.out, `${id}.out`), 'utf8')).toBe('first\n');
    expect((await statusJson(first.configPath)).items).toMatchObject({ done: 2, dead: 0, claimed: 0 });
  }, 150_000);
});
