import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, FIXTURES, statusJson, workspace } from '../helpers/cli.js';
import { filesIn, until } from '../helpers/wait.js';
import { spawn } from 'node:child_process';

// A container without an init runs node as PID 1, and the kernel drops signals to PID 1
// that have no handler. A new PID namespace reproduces that exactly.
const canUnshare = process.getuid?.() === 0 && spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true']).status === 0;

describe.skipIf(!canUnshare)('node as PID 1 (no init in the container)', () => {
  it('drains on SIGTERM and exits 75', async () => {
    const slow = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];
    const ws = workspace({ handler: { command: slow }, concurrency: 1, drain: { gracePeriodSeconds: 4, marginSeconds: 1 } }, { 'a.scc': 'a', 'b.scc': 'b' });
    const markers = path.join(ws.dir, 'markers');
    const child = spawn('unshare', ['--pid', '--fork', '--mount-proc', process.execPath, CLI, 'run', '-c', ws.configPath], {
      env: { ...process.env, SLOW_MS: '60000', MARKER_DIR: markers },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const hard = setTimeout(() => child.kill('SIGKILL'), 30_000);
    let out = '';
    const started = new Promise<void>((resolve) =>
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('"msg":"run started"')) resolve();
      }),
    );
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await started;
    // Signal only once an item is really in flight (the handler wrote its marker).
    await until(() => filesIn(markers).length === 1, 'the handler to start');
    const nodePid = Number(execFileSync('pgrep', ['-P', String(child.pid)]).toString().trim());
    const nspid = readFileSync(`/proc/${nodePid}/status`, 'utf8').match(/^NSpid:\s+(.*)$/m)![1]!.split(/\s+/);
    expect(nspid.at(-1)).toBe('1'); // it really is PID 1 in its namespace
    process.kill(nodePid, 'SIGTERM');
    const code = await exited;
    clearTimeout(hard);
    expect(code).toBe(75);
    expect(out).toContain('"msg":"run finished"');
    expect((await statusJson(ws.configPath)).items).toMatchObject({ claimed: 0, pending: 2 });
  });
});
