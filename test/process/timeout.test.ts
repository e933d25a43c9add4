import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, runCli, statusJson, workspace } from '../helpers/cli.js';
import { alive, filesIn } from '../helpers/wait.js';

describe('a handler that hangs', () => {
  it('is killed at its timeout (SIGTERM ignored, so SIGKILL) and the attempt fails', async () => {
    const hang = [process.execPath, path.join(FIXTURES, 'process/hang-exec.mjs'), '{path}'];
    const ws = workspace(
      { handler: { command: hang, timeoutSeconds: 1, killAfterSeconds: 1 }, retry: { maxAttempts: 1, backoffSeconds: 0, backoffMaxSeconds: 0 } },
      { 'stuck.scc': 'x' },
    );
    const markers = path.join(ws.dir, 'markers');
    const r = await runCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers }, timeoutMs: 30_000 });
    expect(r.code, r.stderr).toBe(0);
    const dead = r.lines.find((l) => l.msg === 'item dead-lettered');
    expect(String(dead?.error)).toContain('timed out after 1s');
    const pids = filesIn(markers).map((f) => Number(readFileSync(path.join(markers, f), 'utf8')));
    expect(pids).toHaveLength(1);
    expect(alive(pids[0]!)).toBe(false);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 0, dead: 1 });
  });
});
