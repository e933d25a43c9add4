import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, workspace } from '../helpers/cli.js';

describe("a command handler's stdout and stderr FIFOs", () => {
  it('their directory removed from $TMPDIR and its name made again by someone else: later items still reopen /dev/stdout, and never write through the new names', async () => {
    // A handler emptying /tmp, or systemd-tmpfiles' age limit on an idle daemon, removed the
    // helper's directory of FIFOs: every later child got sockets (echo > /dev/stdout: ENXIO)
    // for the helper's life. And the names were opened as found: a directory made again under
    // that name with links in it sent the children's output into the files they point to.
    const script = [
      'if [ ! -e "$MARK" ]; then',
      '  : > "$MARK"',
      '  for d in "$TMPDIR"/cronsafe-io-*; do',
      '    rm -rf "$d"; mkdir -m 755 "$d"',
      '    n=0; while [ $n -lt 64 ]; do ln -s "$VICTIM" "$d/$n"o; ln -s "$VICTIM" "$d/$n"e; n=$((n+1)); done',
      '  done',
      'fi',
      'echo "out $1" > /dev/stdout && echo "err $1" > /dev/stderr',
    ].join('\n');
    const ws = workspace({}, {});
    const [mark, victim, tmp] = [path.join(ws.dir, 'mark'), path.join(ws.dir, 'victim'), path.join(ws.dir, 'tmp')];
    const ids = ['a', 'b', 'c', 'd', 'e'];
    const job = workspace(
      { handler: { command: ['sh', '-c', script, 'sh', '{id}'], env: { MARK: mark, VICTIM: victim } }, concurrency: 1, retry: { maxAttempts: 1 }, log: { level: 'info' } },
      Object.fromEntries(ids.map((id) => [id, id])),
    );
    mkdirSync(tmp);
    writeFileSync(victim, '');
    const r = await runCli(['run', '-c', job.configPath], { timeoutMs: 30_000, env: { TMPDIR: tmp } });
    expect(r.code, r.stderr).toBe(0);
    const logged = r.lines.filter((l) => l.stream).map((l) => `${String(l.itemId)} ${String(l.stream)}: ${String(l.msg)}`);
    expect(logged.sort()).toEqual(ids.flatMap((id) => [`${id} stderr: err ${id}`, `${id} stdout: out ${id}`]));
    expect(readFileSync(victim, 'utf8')).toBe('');
  });

  it('a temp directory missing when the first child starts: FIFOs as soon as it exists, not sockets for the helper\'s life', async () => {
    // The helper gave up on FIFOs at its first failure (a $TMPDIR not there yet, a full one, a
    // pids limit refusing mkfifo): a daemon's scripts then failed on /dev/stderr until a restart.
    const ws = workspace({}, {});
    const tmp = path.join(ws.dir, 'tmp-made-by-the-first-item');
    const script = 'mkdir -p "$TMPDIR" && echo "err $1" > /dev/stderr';
    const ids = ['a', 'b', 'c'];
    const job = workspace(
      { handler: { command: ['sh', '-c', script, 'sh', '{id}'] }, concurrency: 1, log: { level: 'info' } },
      Object.fromEntries(ids.map((id) => [id, id])),
    );
    const r = await runCli(['run', '-c', job.configPath], { timeoutMs: 30_000, env: { TMPDIR: tmp } });
    expect(r.code, r.stderr).toBe(0);
    // The first child got sockets (no temp directory yet) and could not reopen its stderr;
    // the two after it had FIFOs in the directory it made.
    const failed = r.lines.filter((l) => l.msg === 'item failed; will retry').map((l) => String(l.itemId));
    expect(failed).toHaveLength(1);
    const ok = r.lines.filter((l) => l.stream === 'stderr' && String(l.msg).startsWith('err ')).map((l) => String(l.itemId));
    expect(ok.sort()).toEqual(ids.filter((id) => !failed.includes(id)).sort());
    // And the run said why the first one's /dev/stderr failed, once.
    const said = r.lines.filter((l) => String(l.msg).startsWith('handler.command children get Unix sockets, not pipes'));
    expect(said).toHaveLength(1);
    expect(said[0]).toMatchObject({ level: 'warn', tmpdir: tmp });
  });
});
