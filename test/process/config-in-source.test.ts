/**
 * The config file inside source.directory (`source.directory: .` beside it), or a link in the
 * source to it: it was an item. Its handler got cronsafe's config, secrets included (a
 * PostgreSQL URL, handler.env), and one that removes its input deleted it: every later run
 * failed for want of a config (exit 78).
 */
import { existsSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { finished, runCli, statusJson, workspace } from '../helpers/cli.js';

// Logs the path it got, then consumes (removes) its input, as a queue worker does.
const CONSUME = ['sh', '-c', 'echo "got $1" >&2; rm -- "$1"', 'consume', '{path}'];

describe('the config file is never an item', () => {
  it('in source.directory itself: not handed to the handler, not deleted, the next run works', async () => {
    const ws = workspace({}, { 'a.txt': 'a' });
    // The config beside the items: source.directory is the config's own directory.
    const configPath = path.join(ws.source, 'cronsafe.yaml');
    const config = YAML.parse(readFileSync(ws.configPath, 'utf8')) as Record<string, unknown>;
    writeFileSync(configPath, YAML.stringify({ ...config, source: { directory: '.' }, output: undefined, handler: { command: CONSUME } }));

    const r = await runCli(['run', '-c', configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toContain('got ' + configPath); // before: the handler got it, and removed it
    expect(finished(r)?.counts).toMatchObject({ scanned: 1, succeeded: 1 });
    expect(existsSync(configPath)).toBe(true);
    const again = await runCli(['run', '-c', configPath]);
    expect(again.code, again.stderr).toBe(0);
    expect((await statusJson(configPath)).items).toEqual({ pending: 0, claimed: 0, done: 1, dead: 0 });
  });

  it('a link in the source to it is not an item either', async () => {
    const ws = workspace({ handler: { command: CONSUME }, output: undefined }, { 'a.txt': 'a' });
    symlinkSync(ws.configPath, path.join(ws.source, 'settings.yaml'));
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toContain('settings.yaml');
    expect(finished(r)?.counts).toMatchObject({ scanned: 1, succeeded: 1 });
  });
});
