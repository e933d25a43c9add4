import { describe, expect, it } from 'vitest';
import { execSizeProblems, type ExecLimits } from '../../src/config/exec-size.js';

const linux4k: ExecLimits = { maxString: () => 131_072, maxTotal: () => 2 * 1024 * 1024 };

describe('execSizeProblems: what Linux would refuse to exec (E2BIG)', () => {
  it('a string of 131,071 bytes is taken, one of 131,072 is not', () => {
    const env = { A: 'x'.repeat(131_071 - 2) };
    expect(execSizeProblems(['/bin/true'], env, {}, linux4k)).toEqual([]);
    const over = execSizeProblems(['/bin/true'], { A: 'x'.repeat(131_072 - 2) }, {}, linux4k);
    expect(over.map((p) => p.key)).toEqual(['handler.env.A']);
  });

  it('placeholders count as empty, so an argument is refused only on its literal text', () => {
    expect(execSizeProblems(['/bin/echo', `${'y'.repeat(131_071 - 6)}{path}`], {}, {}, linux4k)).toEqual([]);
    expect(execSizeProblems(['/bin/echo', 'y'.repeat(131_072)], {}, {}, linux4k).map((p) => p.key)).toEqual(['handler.command[1]']);
  });

  it('with bigger pages (64 KiB: MAX_ARG_STRLEN 2 MiB) or limits it cannot read, nothing that may fit is refused', () => {
    const big = { A: 'x'.repeat(200_000) };
    expect(execSizeProblems(['/bin/true'], big, {}, { maxString: () => 32 * 65_536, maxTotal: () => 6 * 1024 * 1024 })).toEqual([]);
    expect(execSizeProblems(['/bin/true'], big, {}, { maxString: () => undefined, maxTotal: () => undefined })).toEqual([]);
  });

  it("the total counts cronsafe's environment as the child gets it: without CRONSAFE_STATE_POSTGRES, handler.env winning", () => {
    const half = 'p'.repeat(120_000);
    const limits: ExecLimits = { maxString: () => 131_072, maxTotal: () => 200_000 };
    expect(execSizeProblems(['/bin/true'], { B: half }, { CRONSAFE_STATE_POSTGRES: half, B: half }, limits)).toEqual([]);
    expect(execSizeProblems(['/bin/true'], { B: half }, { OTHER: half }, limits).map((p) => p.key)).toEqual(['handler.env']);
    expect(execSizeProblems(['/bin/true'], {}, { OTHER: half, MORE: half }, limits).map((p) => p.key)).toEqual(['handler.command']);
  });
});
