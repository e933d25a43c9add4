/**
 * The tests' temporary directories (test/helpers/tmp-root.ts). Before, each run of the
 * suite left thousands of directories in /tmp (workspaces, chart values, kubeconfigs, the
 * CLI's FIFO and link directories): none of them is removed by the test that made it. Now
 * the whole run works under one directory of its own, removed at the run's end.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, closeSync, constants, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, realpathSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { flockSync } from '../../src/flock.js';
import setup from '../helpers/tmp-root.js';

describe("the test run's temporary directory", () => {
  it('is where this worker and the processes it starts make their temporary files', () => {
    const root = tmpdir();
    expect(path.basename(root)).toMatch(/^cronsafe-tests-[A-Za-z0-9]{6}$/);
    const child = execFileSync(process.execPath, ['-e', 'process.stdout.write(require("node:os").tmpdir())'], { encoding: 'utf8' });
    expect(child).toBe(root);
    const made = execFileSync('mktemp', ['-d'], { encoding: 'utf8' }).trim();
    expect(path.dirname(made)).toBe(root);
  });

  it("is removed at the run's end, read-only directories in it too, and a dead run's by the next run; a live run's never", () => {
    const base = mkdtempSync(path.join(tmpdir(), 'cronsafe-tmproot-'));
    const outer = process.env.TMPDIR;
    process.env.TMPDIR = base;
    try {
      // Runs that died before their teardown (killed): one unheld, one still held (live).
      const dead = path.join(base, 'cronsafe-tests-Dead01');
      const live = path.join(base, 'cronsafe-tests-Live01');
      const fresh = path.join(base, 'cronsafe-tests-Fresh1');
      for (const d of [dead, live, fresh]) mkdirSync(path.join(d, 'cronsafe-proc-x'), { recursive: true });
      const then = new Date(Date.now() - 120_000);
      for (const d of [dead, live]) utimesSync(d, then, then);
      const held = openSync(live, constants.O_RDONLY | constants.O_DIRECTORY);
      flockSync(held, 'exnb');
      try {
        const teardown = setup();
        const root = process.env.TMPDIR;
        expect(path.dirname(root)).toBe(base);
        expect(readdirSync(base).sort()).toEqual([path.basename(root), 'cronsafe-tests-Fresh1', 'cronsafe-tests-Live01'].sort());
        // What a test leaves: a workspace with a read-only directory, an unreadable one.
        const ws = mkdtempSync(path.join(tmpdir(), 'cronsafe-proc-'));
        mkdirSync(path.join(ws, 'ro', 'deep'), { recursive: true });
        writeFileSync(path.join(ws, 'ro', 'deep', 'f'), 'x');
        chmodSync(path.join(ws, 'ro', 'deep'), 0o500);
        chmodSync(path.join(ws, 'ro'), 0o000);
        // And a tree deeper than PATH_MAX (4,096 bytes), as the deep-tree tests leave.
        const dig = 'process.chdir(process.argv[1]); for (let i = 0; i < 50; i++) { fs.mkdirSync("d".repeat(100)); process.chdir("d".repeat(100)); }';
        const deep = spawnSync(process.execPath, ['-e', dig, ws], { encoding: 'utf8' });
        expect(deep.status, deep.stderr).toBe(0);
        teardown();
        expect(process.env.TMPDIR).toBe(base);
        expect(existsSync(root)).toBe(false);
      } finally {
        closeSync(held);
      }
      expect(readdirSync(base).sort()).toEqual(['cronsafe-tests-Fresh1', 'cronsafe-tests-Live01']);
    } finally {
      if (outer === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = outer;
    }
  });

  it('keeps the paths short enough for Unix sockets (a PostgreSQL server puts its socket in its directory)', () => {
    const pgSocket = path.join(realpathSync(tmpdir()), 'cronsafe-pg-XXXXXX', '.s.PGSQL.65535');
    expect(pgSocket.length).toBeLessThan(100);
  });
});
