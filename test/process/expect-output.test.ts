import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, finished, runCli, statusJson, workspace } from '../helpers/cli.js';

/**
 * A handler that exits 0 and writes nothing to {output} (a typo in its output path) is
 * counted in `run finished` (counts.noOutput); with handler.expectOutput it fails.
 */
const files = { 'a.scc': 'a', 'b.scc': 'b', 'c.scc': 'c' };
const silent = { command: ['true'] };
const copying = { command: [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'] };

describe('handler.expectOutput', () => {
  it('off (the default): attempts that wrote nothing are done, and counted', async () => {
    const ws = workspace({ handler: silent }, files);
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)).toMatchObject({ outcome: 'completed', counts: { succeeded: 3, noOutput: 3 } });
  });

  it('on: an attempt that exits 0 without output fails with a clear error; one that writes succeeds', async () => {
    const ws = workspace({ handler: { ...silent, expectOutput: true } }, files);
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(finished(r)).toMatchObject({ outcome: 'completed', counts: { succeeded: 0, failed: 3, noOutput: 3 } });
    const failed = r.lines.filter((l) => l.msg === 'item failed; will retry');
    expect(failed).toHaveLength(3);
    expect(failed[0]?.error).toBe('the handler succeeded but wrote nothing to its output path ({output}), and handler.expectOutput is true');
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 3, claimed: 0, done: 0, dead: 0 });

    const writes = workspace({ handler: { ...copying, expectOutput: true } }, files);
    const ok = await runCli(['run', '-c', writes.configPath]);
    expect(finished(ok)).toMatchObject({ outcome: 'completed', counts: { succeeded: 3, noOutput: 0 } });
  });

  it('on without output.directory is a config error naming the key', async () => {
    const ws = workspace({ handler: { ...silent, expectOutput: true }, output: undefined }, files);
    const r = await runCli(['validate', '-c', ws.configPath]);
    expect(r.code).toBe(78);
    expect(r.stderr).toContain('handler.expectOutput: true needs output.directory (the output it expects goes there)');
  });
});
