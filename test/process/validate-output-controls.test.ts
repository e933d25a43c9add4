/**
 * `cronsafe validate` prints the config's path and its resolved values. A path or a value
 * holding ESC or a C1 control (a config named from a listing, `source.directory` a producer
 * named) reached the terminal raw in that report (JSON.stringify escapes C0 but leaves DEL
 * and C1), where the same path in a config error is shown escaped. Now both are JSON escapes,
 * and the JSON part still parses to the exact values.
 */
import { copyFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, runCli, workspace } from '../helpers/cli.js';

const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

describe('validate never writes a control character raw', () => {
  it('a config path with ESC and a source.directory with a C1 control', async () => {
    const ws = workspace({ handler: { command: ['true'] } });
    const source = path.join(ws.dir, 'queue-\u009b2J');
    mkdirSync(source);
    configure(ws, { source: { directory: source } });
    const file = path.join(ws.dir, '\u001b]0;pwned\u0007.yaml');
    copyFileSync(ws.configPath, file);
    const r = await runCli(['validate', '-c', file]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toMatch(RAW);
    const [first, ...rest] = r.stdout.split('\n');
    expect(first).toContain(`${ws.dir}/\\u001b]0;pwned\\u0007.yaml: OK`);
    expect(JSON.parse(rest.join('\n'))).toMatchObject({ configPath: file, source: { directory: source } });
  });
});
