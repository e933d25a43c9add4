/**
 * The kubernetes policy follows the controller's chain of fires back to the search horizon,
 * transition by transition (src/schedule/occurrences.ts). For a schedule that fires every
 * day it stops at the last transition when the chain cannot differ there; this checks that
 * shortcut against the whole chain (wholeChainAround: the same walk, no shortcut, no cache), in
 * zones whose transitions are whole hours, half hours (Lord Howe), at midnight (Asuncion,
 * Sao Paulo), a whole day (Apia 2011), or off the hour (Chatham, St Johns).
 */
import { describe, expect, it } from 'vitest';
import { latestOccurrence, nextOccurrence, wholeChainAround } from '../../src/schedule/occurrences.js';
import { DAY } from '../../src/schedule/zone.js';

const ZONES = ['Europe/London', 'America/New_York', 'Australia/Lord_Howe', 'America/Asuncion', 'America/Sao_Paulo', 'Pacific/Apia', 'Pacific/Chatham', 'America/St_Johns', 'Africa/Casablanca', 'Antarctica/Troll'];
const EVERY_DAY = ['*/5 * * * *', '0 * * * *', '30 1 * * *', '30 2 * * *', '0 0 * * *', '15 */4 * * *', '*/7 3 * * *', '*/10 0-3 * * *', '59 23 * * *'];
// Not every day: always the whole chain (these end it in Asuncion and Apia).
const SOME_DAYS = ['0 0 29 2 *', '5 0 1 * *', '0 0 31 * *', '30 2 * * 0'];

describe('the chain shortcut for schedules that fire every day', () => {
  it('agrees with the whole chain, near transitions and between them', () => {
    let seed = 13;
    const rnd = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const differ: string[] = [];
    for (let i = 0; i < 240; i++) {
      const zone = ZONES[i % ZONES.length]!;
      const cron = i % 4 === 3 ? SOME_DAYS[Math.floor(rnd() * SOME_DAYS.length)]! : EVERY_DAY[Math.floor(rnd() * EVERY_DAY.length)]!;
      // 1995-2035, most of them in the months where clocks change.
      const year = 1995 + Math.floor(rnd() * 40);
      const month = rnd() < 0.7 ? [2, 3, 8, 9, 10][Math.floor(rnd() * 5)]! : Math.floor(rnd() * 12);
      const t = Date.UTC(year, month, 1) + Math.floor((rnd() * 31 * DAY) / 1000) * 1000;
      const want = wholeChainAround(cron, zone, t);
      const got = { latest: latestOccurrence(cron, zone, new Date(t), 'kubernetes')?.getTime() ?? null, next: nextOccurrence(cron, zone, new Date(t), 'kubernetes')?.getTime() ?? null };
      if (got.latest !== want.latest || got.next !== want.next) differ.push(`${zone} "${cron}" at ${new Date(t).toISOString()}: ${JSON.stringify(got)} != ${JSON.stringify(want)}`);
    }
    expect(differ).toEqual([]);
  }, 120_000);
});
