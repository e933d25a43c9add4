/**
 * handler.env beside handler.module: a module handler runs inside cronsafe's process and reads
 * cronsafe's own environment, so handler.env is never set for it. It was accepted with nothing
 * said, and a module reading those variables got undefined on every attempt: each item charged
 * until dead. `validate` and each run now warn, naming the variables and where to set them.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, runCli, workspace } from '../helpers/cli.js';

const handler = { module: path.join(FIXTURES, 'handlers/module-ok.mjs'), env: { API_URL: 'http://example.invalid', TOKEN_FILE: '/t' } };
const said = /handler\.env \(API_URL, TOKEN_FILE\) is for command handlers and is not set for a module handler, which runs inside cronsafe's process .*: set these variables there \(the container's env, the chart's extraEnv\), or remove handler\.env/;

describe('handler.env with a module handler (real CLI)', () => {
  it('validate warns on stderr, naming the variables and where to set them, and still exits 0', async () => {
    const ws = workspace({ handler });
    const r = await runCli(['validate', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(said);
    expect(r.stderr).toContain('warning:');
    expect(r.stdout).toContain(': OK');
  });

  it('each run warns in its log, and runs the items', async () => {
    const ws = workspace({ handler }, { 'a.txt': 'a' });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    const warned = r.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: string; key?: string; msg: string })
      .filter((l) => l.key === 'handler.env');
    expect(warned).toHaveLength(1);
    expect(warned[0]!.level).toBe('warn');
    expect(warned[0]!.msg).toMatch(said);
  });

  it('a command handler with handler.env is not warned about', async () => {
    const ws = workspace({ handler: { command: ['true'], env: handler.env } });
    const r = await runCli(['validate', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).not.toContain('handler.env');
  });
});
