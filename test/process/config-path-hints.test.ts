/**
 * A config path that names no file because of how it was given, not because the file is
 * missing: `-c -` (standard input, as kubectl -f - reads it), `-c=job.yaml` (commander reads
 * a short option's value as "=job.yaml"), a space or line break at an end, or a name that is not UTF-8, which Node reads with
 * U+FFFD for each foreign byte. Each said only "config file not found", of a file that `ls`
 * shows; the error now says how to give it (still 78, as a missing file is).
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, FIXTURES, runCli, spawnCliRaw, workspace } from '../helpers/cli.js';

describe('a config path given in a way that names no file', () => {
  it('-c - says standard input is -c /dev/stdin; -c=FILE says how to write the option; a space at an end is shown', async () => {
    const ws = workspace({ handler: { command: ['true'] } });
    copyFileSync(ws.configPath, path.join(ws.dir, 'job.yaml'));
    const dash = await runCli(['validate', '-c', '-'], { cwd: ws.dir });
    expect(dash.code, dash.stderr).toBe(78);
    expect(dash.stderr).toBe(`cronsafe: config error: config file not found: ${ws.dir}/- (for standard input, give -c /dev/stdin)\n`);
    const eq = await runCli(['validate', '-c=job.yaml'], { cwd: ws.dir });
    expect(eq.code, eq.stderr).toBe(78);
    expect(eq.stderr).toBe(`cronsafe: config error: config file not found: ${ws.dir}/=job.yaml (-c=FILE is read as the path "=FILE": write -c FILE or --config=FILE)\n`);
    // A space or line break at the end (`CRONSAFE_CONFIG: "/etc/cronsafe/job.yaml "` in a
    // manifest, `-c "$(cat path-file)"` keeps none, but a here-string does): invisible in the
    // message, which named a file that `ls` shows.
    for (const given of ['job.yaml ', 'job.yaml\n', ' job.yaml']) {
      const r = await runCli(['validate'], { cwd: ws.dir, env: { CRONSAFE_CONFIG: given } });
      expect(r.code, r.stderr).toBe(78);
      expect(r.stderr).toBe(`cronsafe: config error: config file not found: ${path.join(ws.dir, given)} (the path begins or ends with a space or line break: ${JSON.stringify(path.join(ws.dir, given))})\n`);
    }
    // Said only of what is not there: a file named "-" is read.
    writeFileSync(path.join(ws.dir, '-'), `name: dash\nsource: {directory: ${ws.source}}\nhandler: {command: ["true"]}\n`);
    const named = await runCli(['validate', '-c', '-'], { cwd: ws.dir });
    expect(named.code, named.stderr).toBe(0);
  });

  it('a path in bytes that are not UTF-8 says so, not only "not found" of a file that is there', async () => {
    const ws = workspace({ handler: { command: ['true'] } });
    copyFileSync(ws.configPath, Buffer.from(`${ws.dir}/caf\xe9.yaml`, 'latin1'));
    const p = spawnCliRaw('sh', ['-c', 'exec "$0" "$@" "$(printf \'caf\\351.yaml\')"', process.execPath, CLI, 'validate', '-c'], { cwd: ws.dir });
    const { code } = await p.exited;
    expect(code, p.stderr()).toBe(78);
    expect(p.stderr()).toBe(
      `cronsafe: config error: config file not found: ${ws.dir}/caf\ufffd.yaml (the path held bytes that are not UTF-8, which Node reads as U+FFFD, so it names another file: rename the file, or give a link to it with a UTF-8 name)\n`,
    );
  });

  // `CRONSAFE_CONFIG=~/job.yaml` in a systemd unit or a manifest: no shell expands the "~".
  it('a path with a leading "~" says that no shell expanded it', async () => {
    const ws = workspace({ handler: { command: ['true'] } });
    const r = await runCli(['validate'], { cwd: ws.dir, env: { CRONSAFE_CONFIG: '~/job.yaml' } });
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toBe(`cronsafe: config error: config file not found: ${ws.dir}/~/job.yaml (a leading "~" is not the home directory: no shell expanded it; write the path absolute, or $HOME/... where a shell reads it)\n`);
    // A name that only starts with "~" is no home directory written so.
    const named = await runCli(['validate', '-c', '~job.yaml'], { cwd: ws.dir });
    expect(named.stderr).toBe(`cronsafe: config error: config file not found: ${ws.dir}/~job.yaml\n`);
  });

  // A ConfigMap mounted without the key the path names leaves no link; one mounted with
  // `items` renamed, or a volume not mounted, leaves a link to nothing, which `ls` lists.
  it('a symbolic link to no file says it is one, and where it points', async () => {
    const ws = workspace({ handler: { command: ['true'] } });
    mkdirSync(path.join(ws.dir, 'cm'));
    symlinkSync('..data/job.yaml', path.join(ws.dir, 'cm', 'job.yaml'));
    const r = await runCli(['validate', '-c', 'cm/job.yaml'], { cwd: ws.dir });
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toBe(`cronsafe: config error: config file not found: ${ws.dir}/cm/job.yaml (it is a symbolic link to "..data/job.yaml", which leads to no file)\n`);
    // A link to a link to nothing: the first link's target is what `ls -l` shows.
    symlinkSync('cm/job.yaml', path.join(ws.dir, 'outer.yaml'));
    const outer = await runCli(['run', '-c', 'outer.yaml'], { cwd: ws.dir });
    expect(outer.code, outer.stderr).toBe(78);
    expect(outer.stderr).toBe(`cronsafe: config error: config file not found: ${ws.dir}/outer.yaml (it is a symbolic link to "cm/job.yaml", which leads to no file)\n`);
  });

  // `cronsafe validate -c /dev/stdin` typed with nothing piped in: it read the terminal, and
  // neither Ctrl-C nor SIGTERM ended it (the read blocks the event loop that runs the signal
  // handlers), only Ctrl-D or SIGKILL.
  it('a terminal given as the config (-c /dev/stdin with nothing piped in) is refused at once, not read until Ctrl-D', () => {
    const ws = workspace({ handler: { command: ['true'] } });
    const r = spawnSync('python3', [path.join(FIXTURES, 'process/pty-run.py'), process.execPath, CLI, 'validate', '-c', '/dev/stdin'], { cwd: ws.dir, encoding: 'utf8', timeout: 90_000 });
    expect(r.status, r.stderr).toBe(0);
    const { code, output } = JSON.parse(r.stdout.trim()) as { code: number | null; output: string };
    expect(output).toContain('cronsafe: config error: config file /dev/stdin is a terminal: cronsafe would wait for the config to be typed; redirect or pipe it in (-c /dev/stdin < job.yaml)');
    expect(code).toBe(78);
  }, 100_000);
});
