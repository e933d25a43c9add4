/**
 * A number or a boolean written in quotes (`concurrency: "8"`, a habit from Kubernetes
 * manifests, where env values must be strings) is a string in YAML. The error said
 * `expected an integer from 1 to 1024, got "8"`, which reads as if 8 were refused; it now
 * says to remove the quotes, for every key that takes a number or true/false (one rule in
 * the formatter, not one per key). A string that is no number gets no such hint.
 */
import { describe, expect, it } from 'vitest';
import { runCli, configFile as writeConfig } from '../helpers/cli.js';

/** A config with `extra` added; a `handler:` line in it replaces the handler. */
function configFile(extra: string): string {
  const handler = extra.startsWith('handler:') ? '' : 'handler: {command: ["true"]}\n';
  return writeConfig(`name: caption-qc\nsource: {directory: ./source}\n${handler}${extra}\n`);
}

const HINT = '(in quotes, so a string: remove the quotes)';

describe('a number or boolean written in quotes', () => {
  it.each([
    ['concurrency: "8"', 'concurrency: expected an integer from 1 to 1024, got "8"'],
    ["queueSize: '16'", 'queueSize: expected an integer >= 1, got "16"'],
    ['lease: {seconds: "90"}', 'lease.seconds: expected a number of seconds > 0 and <= 2147483, got "90"'],
    ['retry: {backoffSeconds: "1.5"}', 'retry.backoffSeconds: expected a number of seconds >= 0 and <= 3153600000 (100 years), got "1.5"'],
    ['metrics: {port: "9090"}', 'metrics.port: expected an integer from 1 to 65535, got "9090"'],
    ['handler: {command: ["true"], expectOutput: "true"}', 'handler.expectOutput: expected true or false, got "true"'],
  ])('%s: exit 78, the error says to remove the quotes', async (extra, said) => {
    const file = configFile(extra);
    const r = await runCli(['validate', '-c', file]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toBe(`cronsafe: config error: ${file}: ${said} ${HINT}\n`);
  });

  // Removing the quotes would not make these a number: a word, a space inside the quotes.
  it.each([
    ['concurrency: "eight"', 'concurrency: expected an integer from 1 to 1024, got "eight"'],
    ['concurrency: "8 "', 'concurrency: expected an integer from 1 to 1024, got "8 "'],
  ])('%s: no such hint', async (extra, said) => {
    const file = configFile(extra);
    const r = await runCli(['validate', '-c', file]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toBe(`cronsafe: config error: ${file}: ${said}\n`);
  });
});
