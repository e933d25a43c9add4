/**
 * `cronsafe daemon` loads its config once: the check that an interpreter's script is there
 * (`python3 /app/qc.py`: exit 78, nothing claimed) ran only at its start. A script removed
 * while it ran (a deploy that replaces /app, a rename) was not seen by its later passes:
 * the interpreter failed each attempt alike (python3 exits 2, node 1), and every item was
 * charged, pass after pass, until dead. A pass checks it as a run's start does.
 */
import path from 'node:path';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configure, spawnCli, statusJson, workspace } from '../helpers/cli.js';

describe('cronsafe daemon whose handler script is removed while it runs', () => {
  it('its next pass is refused with 78 naming handler.command, and no item is charged', async () => {
    const ws = workspace(
      {
        handler: { command: ['/bin/true'] },
        schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' },
        daemon: { tickSeconds: 1, growth: { enabled: true, cooldownSeconds: 1 } },
      },
      { 'a.scc': 'a' },
    );
    const app = path.join(ws.dir, 'app');
    mkdirSync(app);
    const script = path.join(app, 'qc.mjs');
    writeFileSync(script, 'process.exit(0)\n');
    configure(ws, { handler: { command: [process.execPath, script, '{path}'] } });

    const daemon = spawnCli(['daemon', '-c', ws.configPath], { timeoutMs: 60_000 });
    let second: string;
    try {
      const first = await daemon.waitFor((l) => l.msg === 'run finished' && l.outcome === 'completed', 30_000);
      rmSync(app, { recursive: true });
      writeFileSync(path.join(ws.source, 'b.scc'), 'b');
      second = await daemon.waitFor((l) => l.msg === 'run finished' && l !== first, 30_000).then(
        () => 'another pass ran',
        () => 'exited',
      );
    } finally {
      daemon.child.kill('SIGTERM');
    }
    const { code } = await daemon.exited;
    // Before: 'another pass ran', b.scc failed with node's exit 1 and was charged (pending, 1 attempt).
    expect(second, daemon.stderr()).toBe('exited');
    expect(code).toBe(78);
    expect(daemon.stderr()).toContain(`handler.command: cannot run the script: ${JSON.stringify(process.execPath)} is given the script ${JSON.stringify(script)}, which does not exist`);
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
  });
});
