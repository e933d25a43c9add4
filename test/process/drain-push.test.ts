import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FIXTURES, spawnCli, workspace } from '../helpers/cli.js';
import { filesIn, until } from '../helpers/wait.js';

const slow = [process.execPath, path.join(FIXTURES, 'process/slow-exec.mjs'), '{path}', '{output}'];

let gateway: Server | undefined;
afterEach(async () => {
  gateway?.closeAllConnections();
  await new Promise((r) => gateway?.close(r) ?? r(undefined));
  gateway = undefined;
});

describe('the drain and the Pushgateway', () => {
  // After the drain's deadline come the handlers' kill, the final push, the Lease release and
  // the Events: each bounded, and together they must fit in the margin. A periodic push still
  // on its way at the deadline made the final push wait for it too (pushes are serialised),
  // past the kubelet's SIGKILL with a short push interval. So no periodic push starts once
  // the drain has begun.
  it('no periodic push starts once the drain has begun', async () => {
    gateway = createServer(() => undefined); // accepts, never answers: every push times out
    await new Promise<void>((r) => gateway!.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;
    const ws = workspace(
      {
        handler: { command: slow, timeoutSeconds: 600 },
        concurrency: 1,
        // 6 s between SIGTERM and the deadline; a push times out after 500 ms (margin / 4).
        drain: { gracePeriodSeconds: 8, marginSeconds: 2 },
        metrics: { pushgateway: url, pushIntervalSeconds: 1 },
      },
      { 'a.scc': 'a', 'b.scc': 'b' },
    );
    const markers = path.join(ws.dir, 'markers');
    const run = spawnCli(['run', '-c', ws.configPath], { env: { MARKER_DIR: markers, SLOW_MS: '120000' } });
    await until(() => filesIn(markers).some((f) => f.endsWith('.started')), 'a handler to start');
    await run.waitFor((l) => l.msg.startsWith('metrics push failed') && l.reason === 'interval', 20_000);
    run.child.kill('SIGTERM');
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(75);
    const draining = run.lines.findIndex((l) => l.msg.startsWith('drain: stopped claiming'));
    expect(draining, 'the drain began').toBeGreaterThanOrEqual(0);
    const failed = (reason: string, from = 0) =>
      run.lines.slice(from).filter((l) => l.msg.startsWith('metrics push failed') && l.reason === reason).length;
    // At most the one already on its way when the signal came.
    expect(failed('interval', draining)).toBeLessThanOrEqual(1);
    expect(failed('run drained', draining), 'the final push was still made').toBe(1);
  });
});
