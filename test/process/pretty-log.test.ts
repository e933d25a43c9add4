import { describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';

// pino-pretty is loaded only for `log.format: pretty` (src/log.ts): this keeps that path honest.
describe('log.format: pretty', () => {
  it('prints human-readable lines, not JSON', async () => {
    const ws = workspace({ handler: { command: ['true'] }, log: { level: 'info', format: 'pretty' } }, { 'a.txt': 'a' });
    const r = await runCli(['run', '-c', ws.configPath], { env: { NO_COLOR: '1' } });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^\[[\d:.]+\] INFO.*: run finished$/m);
    expect(r.stdout.split('\n').some((l) => l.startsWith('{'))).toBe(false);
  });
});
