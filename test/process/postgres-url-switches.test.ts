/**
 * state.postgres's `?ssl=` and `?binary=`, which the pg driver reads from the URL as strings:
 * any value but `ssl=true|1|0|no-verify` is a string it takes as on, `ssl=false` included (SSL
 * with the certificate checked, so every run failed on a server without SSL, exit 1), and any
 * `binary=` but an empty one turns binary results on, `binary=false` included. They passed
 * `cronsafe validate`; a malformed one is now exit 78 naming the parameter, with the password
 * hidden. What the driver reads as written still validates. No server is contacted.
 */
import { describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';

const PASSWORD = 'Hunter2pw';
const url = (query: string): string => `postgres://cronsafe:${PASSWORD}@127.0.0.1:1/jobs?${query}`;
const validate = async (query: string) => {
  const ws = workspace({ handler: { command: ['/bin/true'] }, state: { postgres: url(query) } });
  return runCli(['validate', '-c', ws.configPath]);
};

describe('state.postgres ?ssl= and ?binary=', () => {
  it.each([
    ['ssl=false', '?ssl= to be true, 1, 0 or no-verify, got "false"'],
    ['ssl=garbage', '?ssl= to be true, 1, 0 or no-verify, got "garbage"'],
    ['ssl=0&ssl=off', '?ssl= to be true, 1, 0 or no-verify, got "off"'],
    ['binary=false', '?binary= to be true or 1, got "false"'],
  ])('%s: exit 78 naming state.postgres and the parameter, the password hidden', async (query, said) => {
    const r = await validate(query);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toContain('state.postgres: expected ');
    expect(r.stderr).toContain(said);
    expect(r.stderr).not.toContain(PASSWORD);
  });

  it.each(['ssl=true', 'ssl=1', 'ssl=0', 'ssl=no-verify', 'ssl=', 'sslmode=disable&ssl=whatever', 'binary=true', 'binary='])('%s, as the driver reads it: validates', async (query) => {
    const r = await validate(query);
    expect(r.code, r.stderr).toBe(0);
  });
});
