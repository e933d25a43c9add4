import { readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, configure, spawnCliRaw, workspace } from '../helpers/cli.js';

/**
 * cronsafe started with `umask 000` (a container entrypoint, a systemd unit with
 * UMask=0000, a CI runner) made its state, lock, output and temp directories with mkdir's
 * default mode, 0777: world-writable, so another local user could plant files and links in
 * them (a link at the ledger's `-wal`, a file among the outputs). They are made 0755 less
 * the umask.
 */

const mode = (p: string): string => (statSync(p).mode & 0o7777).toString(8);

describe('umask 000', () => {
  it('the directories cronsafe makes are not writable by group or others (before: 0777)', async () => {
    const ws = workspace({}, { 'a.txt': 'a', 'sub/deeper/b.txt': 'b' });
    // A name that is not UTF-8 is handed over through a link in a directory beside its output.
    writeFileSync(Buffer.concat([Buffer.from(`${ws.source}/`), Buffer.from([0x6e, 0xff, 0x2e, 0x74, 0x78, 0x74])]), 'n');
    const lockDir = path.join(ws.dir, 'locks', 'here');
    configure(ws, {
      lock: { path: path.join(lockDir, 'cronsafe.lock') },
      // The handler writes the mode of the directory its {path} is in: for the name that is not UTF-8, cronsafe's.
      handler: { command: ['/bin/sh', '-c', 'stat -c %a "$(dirname "$1")" > "$2"', 'sh', '{path}', '{output}'] },
    });
    const r = spawnCliRaw('/bin/sh', ['-c', 'umask 000; exec "$0" "$@"', process.execPath, CLI, 'run', '-c', ws.configPath], { timeoutMs: 60_000 });
    const { code } = await r.exited;
    expect(code, r.stderr()).toBe(0);
    const made = [ws.state, lockDir, path.dirname(lockDir), ws.out, path.join(ws.out, '.cronsafe-tmp'), path.join(ws.out, 'sub'), path.join(ws.out, 'sub', 'deeper')];
    expect(Object.fromEntries(made.map((d) => [path.relative(ws.dir, d), mode(d)]))).toEqual(Object.fromEntries(made.map((d) => [path.relative(ws.dir, d), '755'])));
    // Under .cronsafe-tmp: whatever a run leaves there is its own (a job's directory).
    for (const d of readdirSync(path.join(ws.out, '.cronsafe-tmp'), { withFileTypes: true })) {
      if (d.isDirectory()) expect(mode(path.join(ws.out, '.cronsafe-tmp', d.name)), d.name).toBe('755');
    }
    // Its output is named by its id, the byte escaped.
    expect(readFileSync(path.join(ws.out, 'n\\xff.txt.out'), 'utf8').trim()).toBe('755');
  });
});
