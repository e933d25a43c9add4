/**
 * A "%" that starts no %XX escape in state.postgres's password (or user name): libpq refuses
 * such a URL, and the pg driver sent it as written, re-reading the rest of the URL with its
 * other escapes (a %2F, a %40) taken as themselves. It is a config error now (exit 78 naming
 * state.postgres, as a malformed URL is), the password never shown. No server needed.
 */
import { describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';

const SECRET = 'Pw%zzS3cret';

describe('a "%" starting no escape in the URL\'s password', () => {
  it.each([
    ['the config file', {}, `postgresql://app:${SECRET}@db.example/jobs`],
    ['CRONSAFE_STATE_POSTGRES', { CRONSAFE_STATE_POSTGRES: `postgresql://app:${SECRET}@db.example/jobs` }, 'postgresql://app@db.example/jobs'],
    ['the user name', {}, `postgresql://a%zpp:${SECRET.replace('%', '')}@db.example/jobs`],
  ])('given in %s: validate and run exit 78 naming state.postgres, the password not shown', async (_where, env, url) => {
    const ws = workspace({ handler: { command: ['true'] }, state: { postgres: url } }, { 'a.txt': 'a' });
    for (const args of [['validate'], ['run']]) {
      const r = await runCli([...args, '-c', ws.configPath], { env });
      expect(r.code, `${args[0]}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toContain('state.postgres: expected each "%" in the user name and password to start a %XX escape');
      expect(r.stderr + r.stdout).not.toContain('S3cret');
    }
  });

  it('%25 (a "%" itself) and %XX escapes are taken as before', async () => {
    const ws = workspace({ handler: { command: ['true'] }, state: { postgres: 'postgresql://app:Pw%25zz%2FS3cret@db.example/jobs' } });
    const r = await runCli(['validate', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
  });
});
