/**
 * Files the YAML parser gives up on, said as config errors a person can act on. Lists nested
 * thousands deep (`[[[[...`) said "Maximum call stack size exceeded", then the parser's
 * follow-on error once per level (786 lines for 100,000 `[`). An alias bomb ("billion
 * laughs") said "Excessive alias count indicates a resource exhaustion attack" with no line
 * nor key. Both were and stay exit 78; now one line naming where.
 */
import { describe, expect, it } from 'vitest';
import { runCli, configFile as writeConfig } from '../helpers/cli.js';

function configFile(extra: string): string {
  return writeConfig(`name: caption-qc\nsource: {directory: ./source}\nhandler: {command: ["true"]}\n${extra}\n`);
}

describe('YAML the parser gives up on', () => {
  it.each([
    ['100,000 unclosed [', `x: ${'['.repeat(100_000)}`],
    ['5,000 closed [ ]', `x: ${'['.repeat(5_000)}${']'.repeat(5_000)}`],
    ['5,000 levels of block lists (- - - ...)', `x:\n  ${'- '.repeat(5_000)}a`],
  ])('%s: exit 78, one line naming the file and line, not a stack overflow', async (_name, extra) => {
    const file = configFile(extra);
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', file]);
      expect(r.code, `${cmd}: ${r.stderr.slice(0, 2000)}`).toBe(78);
      expect(r.stderr).toMatch(
        new RegExp(`^cronsafe: config error: ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:[45]:\\d+: invalid YAML: lists or mappings nested too deeply to be read \\(hundreds of levels of \\[, \\{ or - inside each other\\): a config is a few levels deep\\n$`),
      );
    }
  });

  it('an alias bomb ("billion laughs"): exit 78 naming the line, column and key of the alias that crosses the limit', async () => {
    const levels = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]'];
    for (const [i, n] of ['b', 'c', 'd', 'e'].entries()) levels.push(`${n}: &${n} [${Array(9).fill(`*${'abcd'[i]}`).join(', ')}]`);
    const file = configFile(levels.join('\n'));
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', file]);
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      // The library counts 10 uses of &c (itself and 9 aliases) times the 81 values in it: past 100 at d's first *c.
      expect(r.stderr).toBe(`cronsafe: config error: ${file}:7:8: d[0]: invalid YAML: the alias *c makes more than 100 uses of an anchor's content, counting the aliases inside it (an "alias bomb"?): write the values out\n`);
    }
  });

  it('101 aliases of one value are still refused, naming the 101st', async () => {
    const file = configFile(`x: &v 1\ny: [${Array(101).fill('*v').join(', ')}]`);
    const r = await runCli(['validate', '-c', file]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toMatch(/cronsafe\.yaml:5:\d+: y\[99\]: invalid YAML: the alias \*v makes more than 100 uses of an anchor's content/);
  });
});
