import { describe, expect, it } from 'vitest';
import { Channel } from '../../src/runner/channel.js';

describe('Channel', () => {
  it('rejects a capacity below 1 with a message that names it', () => {
    expect(() => new Channel(0)).toThrow('Expected capacity to be an integer from 1 and up, got 0');
  });

  it('blocks the sender when full and resumes it when a value is taken', async () => {
    const ch = new Channel<number>(2);
    await ch.send(1);
    await ch.send(2);
    let third = false;
    const p = ch.send(3).then(() => (third = true));
    await new Promise((r) => setImmediate(r));
    expect(third).toBe(false);
    expect(ch.size).toBe(2);
    expect((await ch.receive()).value).toBe(1);
    await p;
    expect(third).toBe(true);
    expect(ch.size).toBe(2);
  });

  it('offer buffers without waiting until full, then refuses (nothing done); a waiting receiver gets the value at once', async () => {
    const ch = new Channel<number>(2);
    const waiting = ch.receive();
    expect(ch.offer(1)).toBe(true);
    expect(await waiting).toEqual({ value: 1, done: false });
    expect([ch.offer(2), ch.offer(3), ch.offer(4)]).toEqual([true, true, false]);
    expect(ch.size).toBe(2);
    expect(ch.take(5)).toEqual([2, 3]);
    ch.close();
    expect(() => ch.offer(5)).toThrow('send on a closed channel');
  });

  it('never holds more than capacity while a fast producer meets a slow consumer', async () => {
    const ch = new Channel<number>(4);
    let maxSize = 0;
    const producer = (async () => {
      for (let i = 0; i < 200; i++) {
        await ch.send(i);
        maxSize = Math.max(maxSize, ch.size);
      }
      ch.close();
    })();
    const got: number[] = [];
    for await (const v of ch) {
      got.push(v);
      if (v % 10 === 0) await new Promise((r) => setImmediate(r));
    }
    await producer;
    expect(got).toEqual(Array.from({ length: 200 }, (_, i) => i));
    expect(maxSize).toBeLessThanOrEqual(4);
  });

  it('close ends receivers after the buffer empties and closeAndTake returns what was buffered', async () => {
    const ch = new Channel<string>(3);
    await ch.send('a');
    await ch.send('b');
    expect(ch.closeAndTake()).toEqual(['a', 'b']);
    expect((await ch.receive()).done).toBe(true);
    await expect(ch.send('c')).rejects.toThrow('send on a closed channel');
  });

  it('a sender blocked on a full channel throws when the channel closes', async () => {
    const ch = new Channel<number>(1);
    await ch.send(1);
    const blocked = ch.send(2);
    ch.closeAndTake();
    await expect(blocked).rejects.toThrow('closed');
  });
});
