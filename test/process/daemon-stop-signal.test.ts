/**
 * `cronsafe daemon` stopped between passes by a signal: its last line, `daemon stopped`, said
 * `result: "stopped"` and nothing else, the same for a SIGTERM from systemd as for the SIGHUP
 * of the terminal it was started from closing (`nohup cronsafe daemon &` does not keep it, as
 * Node resets that signal's disposition), so a daemon found gone with exit 0 left no word of
 * why. The line names the signal now. SIGALRM (`timeout -s ALRM`) ended it at once, exit 142,
 * with no line at all: it stops the daemon as SIGTERM does now. SIGQUIT and SIGUSR2 still end it
 * at once as a crash does (docs/operations.md), but no longer silently: one stderr line says so.
 */
import { describe, expect, it } from 'vitest';
import { spawnCli, workspace } from '../helpers/cli.js';

describe('cronsafe daemon stopped by a signal between passes', () => {
  it.each(['SIGHUP', 'SIGTERM', 'SIGINT', 'SIGALRM'] as const)('%s: exit 0, `daemon stopped` names the signal', async (sig) => {
    // A yearly occurrence long past (no graceSeconds: never stale): one pass at start, then idle.
    const ws = workspace({ handler: { command: ['true'] }, schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' }, daemon: { tickSeconds: 1 } }, { 'a.txt': 'a' });
    const daemon = spawnCli(['daemon', '-c', ws.configPath], { timeoutMs: 60_000 });
    try {
      await daemon.waitFor((l) => l.msg === 'run finished' && l.outcome === 'completed', 30_000);
    } finally {
      daemon.child.kill(sig);
    }
    const { code, signal } = await daemon.exited;
    expect(signal, daemon.stderr()).toBeNull();
    expect(code, daemon.stderr()).toBe(0);
    expect(daemon.lines.at(-1)).toMatchObject({ msg: 'daemon stopped', result: 'stopped', signal: sig });
  }, 60_000);

  it.each(['SIGQUIT', 'SIGUSR2'] as const)('%s: ends at once as a crash does (the signal), saying so on stderr', async (sig) => {
    const ws = workspace({ handler: { command: ['true'] }, schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' }, daemon: { tickSeconds: 1 } }, { 'a.txt': 'a' });
    // In its workspace: where core dumps are on, SIGQUIT's lands in the working directory.
    const daemon = spawnCli(['daemon', '-c', ws.configPath], { timeoutMs: 60_000, cwd: ws.dir });
    try {
      await daemon.waitFor((l) => l.msg === 'run finished' && l.outcome === 'completed', 30_000);
    } finally {
      daemon.child.kill(sig);
    }
    const { signal } = await daemon.exited;
    expect(signal, daemon.stderr()).toBe(sig);
    expect(daemon.stderr()).toBe(`cronsafe: ${sig}: ending at once (no drain: the attempts running are charged, as after a crash; SIGTERM drains)\n`);
    expect(daemon.lines.some((l) => l.msg === 'daemon stopped')).toBe(false);
  }, 60_000);
});
