/**
 * C1 controls (U+0080-U+009F) from a handler's stderr or an item's file name never reach
 * the operator's terminal raw. U+009B is CSI and U+009D is OSC to terminals that take 8-bit
 * controls in UTF-8 (xterm, VTE), as ESC [ and ESC ] are; JSON.stringify and pino escape
 * ESC but leave them as they are. Before, the run's log (`kubectl logs`, or
 * `log.format: pretty` at a terminal) and the `--json` listings printed them raw. Now they
 * are JSON escapes, and the JSON still parses to exactly the same id and last error.
 */
import { chmodSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configure, runCli, workspace } from '../helpers/cli.js';
import { chownTree, NOBODY } from '../helpers/users.js';

const RAW_C1 = /[\u007f-\u009f]/;
// What a handler prints: a CSI that clears the screen and an OSC that sets the window title.
const PRINTF = 'printf "boom \\302\\2332J \\302\\2350;pwned\\007 end" >&2; exit 3';
const ERROR = 'exit code 3: boom \u009b2J \u009d0;pwned\u0007 end';
const ID = 'c1-\u009b31m.txt';

describe('C1 controls in logs and --json output', () => {
  it.each(['json', 'pretty'])('log.format %s: the run log holds none raw; the JSON listings escape them and parse to the exact values', async (format) => {
    const ws = workspace({ handler: { command: ['sh', '-c', PRINTF] }, retry: { maxAttempts: 1 }, log: { level: 'info', format } }, { [ID]: 'x' });
    const run = await runCli(['run', '-c', ws.configPath]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('item dead-lettered');
    expect(run.stdout).not.toMatch(RAW_C1);
    if (format === 'json') {
      const dead = run.lines.find((l) => l.msg === 'item dead-lettered');
      expect(dead).toMatchObject({ itemId: ID, error: ERROR });
    } else {
      expect(run.stdout).toContain('\\u009b2J');
    }

    for (const args of [['status', '--json'], ['dead-letter', 'list', '--json']]) {
      const r = await runCli([...args, '-c', ws.configPath]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout, args.join(' ')).not.toMatch(RAW_C1);
      const parsed = JSON.parse(r.stdout) as { deadLetters?: unknown[] } | unknown[];
      const dead = Array.isArray(parsed) ? parsed : parsed.deadLetters!;
      expect(dead).toEqual([expect.objectContaining({ id: ID, lastError: ERROR })]);
    }
  }, 60_000);
});

describe('control characters in the failed run\'s line on stderr', () => {
  // `cronsafe: run failed: <reason>` is written to stderr as it is, and the reason can hold a
  // name a producer chose: an item path under a directory that became unreadable. kubectl
  // logs shows stderr too, so its ESC, BEL and U+009B reached the operator's terminal raw.
  it('shows them as escapes, on one line', async () => {
    const dir = 'locked\u001b]0;pwned\u0007\u001b[2J\u009b31m\nforged';
    const ws = workspace({ concurrency: 1 }, { [`${dir}/x0.txt`]: 'x', [`${dir}/x1.txt`]: 'x' });
    // The first attempt makes its directory unreadable: the second item is queued already.
    const h = path.join(ws.dir, 'copy-then-lock.sh');
    writeFileSync(h, '#!/bin/sh\nset -e\ncat "$1" > "$2"\nchmod 000 "$(dirname "$1")"\n', { mode: 0o755 });
    configure(ws, { handler: { command: [h, '{path}', '{output}'] } });
    // Root reads anything: run as "nobody", so that EACCES is real.
    const asRoot = process.getuid?.() === 0;
    if (asRoot) chownTree(ws.dir, NOBODY);
    try {
      const r = await runCli(['run', '-c', ws.configPath], asRoot ? { uid: NOBODY, gid: NOBODY } : {});
      expect(r.code, r.stderr).toBe(1);
      const line = r.stderr.split('\n').find((l) => l.startsWith('cronsafe: run failed:'));
      expect(line, r.stderr).toContain('locked\\u001b]0;pwned\\u0007\\u001b[2J\\u009b31m\\u000aforged');
      expect(r.stderr).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
      expect(r.stderr.split('\n').filter((l) => l.startsWith('forged'))).toEqual([]);
    } finally {
      chmodSync(path.join(ws.source, dir), 0o755);
    }
  }, 60_000);
});

