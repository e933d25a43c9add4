/**
 * `-c ""` (`cronsafe requeue --all -c "$CONFIG"` with CONFIG unset in a script) is a usage
 * error (exit 2) naming the option, as an empty --at or --glob is: read as "not given", it
 * took $CRONSAFE_CONFIG or ./cronsafe.yaml, another job's config, and `requeue --all` put
 * every done item of that job back to pending with exit 0. An empty CRONSAFE_CONFIG is
 * still unset, as an empty variable is in the shell.
 */
import { describe, expect, it } from 'vitest';
import { runCli, statusJson, workspace } from '../helpers/cli.js';

describe('an empty -c / --config', () => {
  // Its config is cronsafe.yaml in its directory: what a fallback to ./cronsafe.yaml finds.
  const done = async () => {
    const w = workspace({ handler: { command: ['cp', '{path}', '{output}'] } }, { 'a.txt': 'a', 'b.txt': 'b' });
    const r = await runCli(['run', '-c', w.configPath]);
    expect(r.code, r.stderr).toBe(0);
    return w;
  };

  it.each([
    [['requeue', '--all', '-c', '']],
    [['requeue', '--all', '--config=']],
    [['dead-letter', 'retry', '--all', '-c', '']],
    [['status', '-c', '']],
    [['run', '-c', '']],
  ])('%j: exit 2 naming the option, the config found otherwise left alone', async (args: string[]) => {
    const w = await done();
    for (const opts of [{ cwd: w.dir }, { env: { CRONSAFE_CONFIG: w.configPath } }]) {
      const r = await runCli(args, opts);
      expect(r.code, r.stdout + r.stderr).toBe(2);
      expect(r.stderr).toContain("option '-c, --config <file>' argument '' is invalid");
      expect(r.stdout).toBe('');
      expect(r.lines.some((l) => l.msg === 'run started')).toBe(false);
    }
    expect((await statusJson(w.configPath)).items).toMatchObject({ pending: 0, done: 2 });
  });

  it('an empty CRONSAFE_CONFIG is unset: ./cronsafe.yaml is read', async () => {
    const w = await done();
    const r = await runCli(['status', '--json'], { cwd: w.dir, env: { CRONSAFE_CONFIG: '' } });
    expect(r.code, r.stderr).toBe(0);
    expect((JSON.parse(r.stdout) as { items: unknown }).items).toMatchObject({ done: 2 });
  });
});
