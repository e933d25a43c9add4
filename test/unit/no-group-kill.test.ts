import { describe, expect, it } from 'vitest';

// test/helpers/no-group-kill.ts: a pid read before it was written (Number('') is 0) must not
// reach the test's own process group. Signal 0 here: were the guard missing, nothing is hurt
// and the test fails.
describe('process.kill in the tests', () => {
  it('refuses pid 0, -0, -1 and NaN, and still signals a real pid', () => {
    for (const pid of [Number(''), -0, -1, Number('x')]) expect(() => process.kill(pid, 0), String(pid)).toThrow(/refusing to signal/);
    expect(process.kill(process.pid, 0)).toBe(true);
  });
});
