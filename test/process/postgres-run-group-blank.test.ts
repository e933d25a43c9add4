import { describe, expect, it } from 'vitest';
import { runCli, statusJson, workspace } from '../helpers/cli.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';

describe.skipIf(PG_SKIP_REASON !== undefined)('PostgreSQL: CRONSAFE_RUN_GROUP of blanks only', () => {
  const pg = usePostgresDatabase('rungroup', 60_000);

  it('is refused with exit 78 naming the variable, before anything is claimed (it was taken as a group every Job shared)', async () => {
    const ws = workspace({ handler: { command: ['true'] }, state: { postgres: pg.url, schema: 'rg' } }, { 'a.txt': 'a' });
    const r = await runCli(['run', '-c', ws.configPath], { env: { CRONSAFE_RUN_GROUP: '   ' } });
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr.trim()).toBe('cronsafe: CRONSAFE_RUN_GROUP: expected a run group name, got "   " (blanks only): unset it (the Job\'s name is then the group) or give a name');
    expect(r.lines.map((l) => l.msg)).not.toContain('run started');
    // Empty is unset, as in the shell; a name is a name.
    for (const group of ['', 'nightly']) {
      const ok = await runCli(['run', '-c', ws.configPath], { env: { CRONSAFE_RUN_GROUP: group } });
      expect(ok.code, ok.stderr).toBe(0);
    }
    expect((await statusJson(ws.configPath)).items.done).toBe(1);
  }, 60_000);
});
