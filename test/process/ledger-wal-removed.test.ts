/**
 * SQLite's files beside the ledger (`<ledger>-wal`, `-shm`) deleted under a live run, as
 * stray files by an operator or a cleaner. The run went on writing into the unlinked log it
 * still had open, and a kill then lost everything it had recorded since the last checkpoint
 * (up to 10,000 pages): on a new ledger, its tables too, so the next run did every item
 * again. Closing the ledger still writes that open log into the file, so the run stops
 * (drained, exit 75) as soon as it sees the files gone.
 */
import { existsSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, finished, runCli, spawnCli, statusJson, workspace } from '../helpers/cli.js';
import { until } from '../helpers/wait.js';

describe("the ledger's write-ahead log deleted while a run holds it", () => {
  const cases = [
    { removed: ['-wal', '-shm'], link: false },
    { removed: ['-wal'], link: false },
    { removed: ['-shm'], link: false },
    // SQLite keeps them beside the file a link at state.sqlite points to.
    { removed: ['-wal', '-shm'], link: true },
  ];
  for (const { removed, link } of cases) {
    it(`${removed.join(' and ')} removed${link ? ' (state.sqlite a link to the ledger)' : ''}: the run stops (75), keeping what it recorded; a kill then loses nothing`, async () => {
      const ws = workspace({ log: { level: 'info' } }, { 'a.txt': 'a', 'b.txt': 'b', 'c.txt': 'c' });
      let db = ws.db;
      if (link) {
        db = path.join(ws.dir, 'volume', 'ledger.db');
        mkdirSync(path.dirname(db));
        mkdirSync(ws.state);
        symlinkSync(db, ws.db);
      }
      const handled = path.join(ws.dir, 'handled.log');
      const marker = path.join(ws.dir, 'second-started');
      // The first attempt deletes the files and outlives the lock's recheck (1 s); a second
      // attempt says it started and waits to be killed with cronsafe.
      const script =
        'echo "$0" >> "$1"; n=$(wc -l < "$1"); ' +
        `if [ "$n" -eq 1 ]; then for s in ${removed.join(' ')}; do rm -f "$2$s"; done; sleep 2.5; ` +
        'elif [ "$n" -eq 2 ]; then touch "$3"; sleep 30; fi';
      configure(ws, { handler: { command: ['sh', '-c', script, '{id}', handled, db, marker] }, concurrency: 1 });

      const run = spawnCli(['run', '-c', ws.configPath]);
      let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
      void run.exited.then((e) => (exit = e));
      await until(() => exit !== undefined || existsSync(marker), 'the run to end or start a second item', 30_000);
      // A second item started: what the run recorded is in a log no one else can find.
      if (exit === undefined) run.child.kill('SIGKILL');
      const { code } = await run.exited;
      expect(code, run.stderr()).toBe(75);
      expect(finished(run)?.outcome).toBe('drained');
      expect(run.lines.some((l) => String(l.reason).includes("SQLite's write-ahead log") && String(l.reason).includes('removed or replaced during the run'))).toBe(true);

      // The first item's success is in the ledger: the next run does the other two only.
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 2, claimed: 0, done: 1, dead: 0 });
      configure(ws, { handler: { command: ['sh', '-c', 'echo "$0" >> "$1"', '{id}', handled] } });
      const next = await runCli(['run', '-c', ws.configPath]);
      expect(next.code, next.stderr).toBe(0);
      expect(finished(next)?.counts).toMatchObject({ succeeded: 2 });
      const ids = readFileSync(handled, 'utf8').trim().split('\n');
      expect([...ids].sort()).toEqual(['a.txt', 'b.txt', 'c.txt']);
      expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 3, dead: 0 });
    }, 60_000);
  }
});
