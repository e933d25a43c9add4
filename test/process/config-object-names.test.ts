/**
 * Names that every JavaScript object has (`__proto__`, `constructor`, `toString`) written as
 * config keys or `${VAR}` names. `handler.env: {__proto__: x}` passed validate and set nothing
 * (the parse drops that key: handler environments are built as objects, where the name is
 * special); `${constructor}` read Object's constructor as if the variable were set, and
 * `retry: {toString: "${N:-3}"}` looked the key up in the schema as a method: both were
 * `fatal:` and a stack trace (exit 1) instead of the config error (78) naming the key.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configFile, runCli, workspace } from '../helpers/cli.js';

const withEnv = (env: string) => `name: caption-qc\nsource: {directory: ./source}\nhandler: {command: ["true"], env: ${env}}\n`;

describe('config keys and ${VAR} names that JavaScript objects have', () => {
  it.each([
    ['a handler.env key named __proto__ (dropped, validate said OK)', withEnv('{A: a, __proto__: x}'), /^cronsafe: config error: .*cronsafe\.yaml: handler\.env\.__proto__: cannot be passed: cronsafe builds the handler's environment as a JavaScript object, where __proto__ is not a key; use another name\n$/],
    ['${constructor}, a variable that is not set', withEnv('{A: "${constructor}"}'), /^cronsafe: config error: .*cronsafe\.yaml: handler\.env\.A: environment variable constructor is not set\n$/],
    ['${__proto__}, a variable that is not set', withEnv('{A: "${__proto__}"}'), /^cronsafe: config error: .*cronsafe\.yaml: handler\.env\.A: environment variable __proto__ is not set\n$/],
    ['a key named toString holding a ${VAR} that reads as a number', `${withEnv('{}')}retry: {toString: "\${CRONSAFE_TEST_UNSET:-3}"}\n`, /^cronsafe: config error: .*cronsafe\.yaml: retry\.toString: unknown key\n$/],
  ])('%s: exit 78 naming the key', async (_name, text, pattern) => {
    const file = configFile(text);
    for (const cmd of ['validate', 'run']) {
      const r = await runCli([cmd, '-c', file], { env: { CRONSAFE_TEST_UNSET: '' } });
      expect(r.code, `${cmd}: ${r.stderr}`).toBe(78);
      expect(r.stderr).toMatch(pattern);
    }
  });

  // A guard, not a fix: these names were passed before and must stay passed.
  it('handler.env keys named constructor, prototype and hasOwnProperty reach the handler', async () => {
    const ws = workspace(
      { handler: { command: ['sh', '-c', 'echo "$constructor $prototype $hasOwnProperty" > "$CRONSAFE_OUTPUT_PATH"'], env: { constructor: 'c', prototype: 'p', hasOwnProperty: 'h' } } },
      { 'a.txt': 'a' },
    );
    const r = await runCli(['run', '-c', ws.configPath]);
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(path.join(ws.out, 'a.txt.out'), 'utf8')).toBe('c p h\n');
  });

  // cronsafe's own environment is passed on whole: a variable named __proto__ (legal in POSIX)
  // was dropped on its way to the handler (copied with Object.assign, which sets a prototype).
  it('an inherited variable named __proto__ reaches the handler', async () => {
    const ws = workspace({ handler: { command: ['sh', '-c', 'printenv __proto__ > "$CRONSAFE_OUTPUT_PATH"'] } }, { 'a.txt': 'a' });
    const r = await runCli(['run', '-c', ws.configPath], { env: { ['__proto__']: 'inherited' } });
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(path.join(ws.out, 'a.txt.out'), 'utf8')).toBe('inherited\n');
  });
});
