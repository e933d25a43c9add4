/**
 * A config file that is not UTF-8 (saved as Latin-1, or with bytes a hostile producer chose):
 * the error named the key as the mangled text it was read as (U+FFFD for each byte), echoing
 * it to the terminal. It shows each such byte as \xHH, as ids are written, escapes what a
 * terminal acts on (src/terminal-safe.ts), and gives the first one's byte offset in the file.
 */
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configFile, runCli } from '../helpers/cli.js';

describe('a config file in bytes that are not UTF-8', () => {
  it.each([['validate'], ['run'], ['status']])('%s: exit 78, the file, the key as its bytes (\\xHH) and the byte offset; nothing raw reaches the terminal', async (command) => {
    const file = configFile('');
    const before = Buffer.from('name: job\nsource: {directory: ./source}\nhandler: {command: [echo]}\n');
    // A Latin-1 key, with an ESC sequence and a C1 CSI byte (not UTF-8 either) in it.
    writeFileSync(file, Buffer.concat([before, Buffer.from([0xe9]), Buffer.from('t'), Buffer.from([0xe9, 0x1b]), Buffer.from('[2J'), Buffer.from([0x9b]), Buffer.from('31m: 1\n')]));
    const r = await runCli([command, '-c', file]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toBe(
      `cronsafe: config error: ${file}:4:1: \\xe9t\\xe9\\u001b[2J\\x9b31m: invalid YAML: bytes that are not UTF-8, the first at byte offset ${before.length} (\\xe9) (a file saved as Latin-1 or UTF-16?): save the file as UTF-8; a file name that is not UTF-8 is written as its id, with \\xHH escapes (caf\\xe9.txt)\n`,
    );
    expect(r.stderr).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\ufffd]/);
  }, 30_000);
});
