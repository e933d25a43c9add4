/**
 * boundHeapGrowth leaves a marking trigger given on node's command line as it is: V8 takes
 * the flag's name with `-` or `_` in any of its places, so every spelling is the user's value.
 */
import { describe, expect, it } from 'vitest';
import { markingTriggerGiven } from '../../src/heap-growth.js';

describe('markingTriggerGiven', () => {
  it('knows the flag in every spelling V8 takes', () => {
    for (const a of [
      '--incremental-marking-hard-trigger=10',
      '--incremental-marking-hard-trigger',
      '--incremental_marking_hard_trigger=0',
      '--incremental_marking-hard-trigger=10',
      '--incremental-marking_hard-trigger=90',
    ])
      expect(markingTriggerGiven(['--optimize-for-size', a]), a).toBe(true);
  });

  it('does not take other flags for it', () => {
    for (const a of ['--incremental-marking', '--no-incremental-marking', '--incremental-marking-soft-trigger=10', '--max-old-space-size=64'])
      expect(markingTriggerGiven([a]), a).toBe(false);
  });
});
