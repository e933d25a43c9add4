/**
 * `cronsafe daemon` imports handler.module once: Node imports a module once per process, so
 * every later pass runs the code imported at the first one. A fixed handler deployed while
 * the daemon ran (the file edited or replaced) was not run, and nothing said so: items kept
 * failing with the old code, dead-letter retries included, until the daemon was restarted.
 * A pass now says that the module changed since it was imported and that a restart runs it.
 */
import path from 'node:path';
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configure, spawnCli, statusJson, workspace } from '../helpers/cli.js';

const CHANGED = 'handler.module has changed since this daemon imported it: its passes run the code imported then; restart the daemon to run the new code';

const moduleWriting = (text: string) => `import { writeFileSync } from 'node:fs';\nexport default async function (item, ctx) { writeFileSync(ctx.outputPath, ${JSON.stringify(text)}); }\n`;

describe('cronsafe daemon whose handler.module is edited while it runs', () => {
  it('says at the next pass that the edit runs only once the daemon is restarted', async () => {
    const ws = workspace(
      {
        handler: { command: ['/bin/true'] },
        schedule: { cron: '0 0 1 1 *', timeZone: 'UTC' },
        daemon: { tickSeconds: 1, growth: { enabled: true, cooldownSeconds: 1 } },
      },
      { 'a.txt': 'a' },
    );
    const file = path.join(ws.dir, 'handler.mjs');
    writeFileSync(file, moduleWriting('v1'));
    configure(ws, { handler: { module: file } });

    const daemon = spawnCli(['daemon', '-c', ws.configPath], { timeoutMs: 60_000 });
    try {
      const first = await daemon.waitFor((l) => l.msg === 'run finished' && l.outcome === 'completed', 30_000);
      writeFileSync(file, moduleWriting('v2-and-longer'));
      writeFileSync(path.join(ws.source, 'b.txt'), 'b');
      await daemon.waitFor((l) => l.msg === 'run finished' && l !== first, 30_000);
    } finally {
      daemon.child.kill('SIGTERM');
    }
    expect((await daemon.exited).code, daemon.stderr()).toBe(0);
    // The code that ran is the one imported first (what Node does); now it is said, once per pass.
    expect(readFileSync(path.join(ws.out, 'b.txt.out'), 'utf8')).toBe('v1');
    const said = daemon.lines.filter((l) => l.msg === CHANGED);
    expect(said).toHaveLength(1); // before: none
    expect(said[0]).toMatchObject({ level: 'warn', module: file });
    expect((await statusJson(ws.configPath)).items).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
  });
});
