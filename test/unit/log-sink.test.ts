import { spawnSync } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, readSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { StdoutSink } from '../../src/log-sink.js';

/** A real FIFO: its read end (non-blocking, not read until asked) and a blocking write end, as a log pipe is. */
function fifo(): { readEnd: number; writeEnd: number; read: () => string } {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'cronsafe-sink-')), 'pipe');
  expect(spawnSync('mkfifo', [file]).status).toBe(0);
  const readEnd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  const writeEnd = openSync(file, constants.O_WRONLY);
  const read = (): string => {
    const chunks: Buffer[] = [];
    const buf = Buffer.alloc(1 << 16);
    for (;;) {
      try {
        const n = readSync(readEnd, buf, 0, buf.length, null);
        if (n === 0) break;
        chunks.push(Buffer.from(buf.subarray(0, n)));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EAGAIN') break; // empty for now
        throw err;
      }
    }
    return Buffer.concat(chunks).toString('utf8');
  };
  return { readEnd, writeEnd, read };
}

const open: number[] = [];
afterEach(() => {
  for (const fd of open.splice(0)) closeSync(fd);
});

const line = (i: number): string => `{"n":${i},"pad":"${'x'.repeat(90)}"}\n`;

describe('StdoutSink (the run log into a pipe)', () => {
  it('is not used where fd 1 is not a pipe: a file is written synchronously as before', () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'cronsafe-sink-')), 'log');
    writeFileSync(file, '');
    const fd = openSync(file, 'a');
    open.push(fd);
    expect(StdoutSink.forStdout(1000, fd)).toBeNull();
  });

  it('never blocks on a full pipe: keeps lines up to its limit, drops and counts the rest, and says so once the reader caught up', async () => {
    const p = fifo();
    open.push(p.readEnd, p.writeEnd);
    const sink = StdoutSink.forStdout(4_000, p.writeEnd)!;
    expect(sink).not.toBeNull();
    const dropped: number[] = [];
    sink.onDropped = (n) => {
      dropped.push(n);
      sink.write(`{"dropped":${n}}\n`);
    };
    // 2,000 lines of 100 bytes: three times what a 64 KiB pipe holds. Each write returns at
    // once (a blocking write would hang this test right here).
    for (let i = 0; i < 2000; i++) sink.write(line(i));
    let text = p.read();
    const done = sink.written();
    for (let i = 0; i < 200 && !text.includes('"dropped"'); i++) {
      await new Promise((r) => setTimeout(r, 10));
      text += p.read();
    }
    await done;
    text += p.read();
    const got = text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as { n?: number; dropped?: number });
    const numbers = got.filter((g) => g.n !== undefined).map((g) => g.n!);
    // In order, none twice, every line whole (JSON.parse above), the note last.
    expect(numbers).toEqual([...numbers].sort((a, b) => a - b));
    expect(new Set(numbers).size).toBe(numbers.length);
    expect(dropped).toHaveLength(1);
    expect(numbers.length + dropped[0]!).toBe(2000);
    expect(numbers.length).toBeGreaterThan(600); // the pipe's 64 KiB plus the queue
    expect(numbers.length).toBeLessThan(2000); // memory bounded: some were dropped
    expect(got.at(-1)).toEqual({ dropped: dropped[0] });
  });

  it('keeps the lines `keep` asks for past its limit, in a bounded reserve', async () => {
    const p = fifo();
    open.push(p.readEnd, p.writeEnd);
    const sink = StdoutSink.forStdout(4_000, p.writeEnd)!;
    sink.keep = (l) => l.includes('"keep"');
    for (let i = 0; i < 2000; i++) sink.write(line(i)); // the pipe and the queue full
    sink.write('{"keep":"run finished"}\n');
    // Past the reserve (256 KiB) even those are dropped: 5,000 of 100 bytes.
    for (let i = 0; i < 5000; i++) sink.write(`{"keep":${i},"pad":"${'x'.repeat(80)}"}\n`);
    let text = p.read();
    const done = sink.written();
    let settled = false;
    void done.then(() => (settled = true));
    while (!settled) {
      await new Promise((r) => setTimeout(r, 5));
      text += p.read();
    }
    text += p.read();
    const got = text.split('\n').filter((l) => l !== '');
    expect(got).toContain('{"keep":"run finished"}');
    const kept = got.filter((l) => l.startsWith('{"keep":') && !l.includes('run finished')).length;
    expect(kept).toBeGreaterThan(2000);
    expect(kept).toBeLessThan(5000);
  });

  it('writes every line, in order, when the reader is only slow', async () => {
    const p = fifo();
    open.push(p.readEnd, p.writeEnd);
    const sink = StdoutSink.forStdout(8 * 1024 * 1024, p.writeEnd)!;
    for (let i = 0; i < 3000; i++) sink.write(line(i));
    let text = p.read();
    let settled = false;
    const done = sink.written().then(() => (settled = true));
    while (!settled) {
      await new Promise((r) => setTimeout(r, 5));
      text += p.read();
    }
    await done;
    text += p.read();
    const numbers = text.split('\n').filter((l) => l !== '').map((l) => (JSON.parse(l) as { n: number }).n);
    expect(numbers).toEqual(Array.from({ length: 3000 }, (_, i) => i));
  });
});
