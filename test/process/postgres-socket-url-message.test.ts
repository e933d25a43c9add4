/**
 * A state.postgres URL naming a Unix socket directory in its authority, percent-encoded as
 * libpq and the driver read it (`postgresql://u:pw@%2Fvar%2Frun%2Fpostgresql/db`): a start
 * that could not connect named it undecoded (`%2Ftmp%2F...:5432`), not the directory it
 * tried. It names the path now, the password still hidden. No server: the socket is absent.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';

describe('a socket directory in the URL, percent-encoded', () => {
  it('is named decoded in the connect error (exit 1), never the password', async () => {
    const dir = path.join(mkdtempSync(path.join(tmpdir(), 'cronsafe-nosock-')), 'nosock');
    const url = `postgresql://u:Pw-s3cret@${encodeURIComponent(dir)}/db`;
    expect(url).toContain('%2F');
    const ws = workspace({ handler: { command: ['true'] }, state: { postgres: url } }, { 'a.txt': 'a' });
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`take the run lock on PostgreSQL ${dir}:5432/db as u (schema cronsafe): connect ENOENT ${dir}/.s.PGSQL.5432`);
    expect(r.stderr).not.toContain('%2F');
    expect(r.stderr + r.stdout).not.toContain('Pw-s3cret');
  }, 60_000);
});
