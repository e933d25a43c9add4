/**
 * A run that cannot reach its PostgreSQL at start-up (nothing listens at the URL's port) retries
 * for its start budget and then exits 1 (DESIGN.md: state store unreachable). `status` said
 * "gave up after N attempt(s) over S s", the run only the last error, as if it had been refused
 * at its first try. Both now say it the same way, naming host:port, never the password.
 */
import { describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';
import { freePort } from '../helpers/prom.js';

describe('PostgreSQL unreachable at start-up', () => {
  it('run and status exit 1 saying they gave up after N attempts, naming host:port, the password hidden', async () => {
    const port = await freePort();
    const password = 'unreachable-s3cret';
    const ws = workspace({ state: { postgres: `postgres://app:${password}@127.0.0.1:${port}/jobs` }, handler: { command: ['cp', '{path}', '{output}'] } }, { 'a.txt': 'a' });
    for (const command of ['run', 'status']) {
      const r = await runCli([command, '-c', ws.configPath], { timeoutMs: 90_000 });
      expect(r.code, `${command}: ${r.stderr}`).toBe(1);
      expect(r.stderr, command).toMatch(new RegExp(`gave up after \\d+ attempt\\(s\\) over [\\d.]+ s: .*PostgreSQL 127\\.0\\.0\\.1:${port}/jobs as app .*ECONNREFUSED`));
      expect(r.stderr + r.stdout, command).not.toContain(password);
    }
  }, 200_000);
});
