/**
 * vitest's sequence.sequencer (vitest.config.ts): the longest test files start first.
 *
 * vitest runs files, not tests, in parallel, and hands them to its workers in the order the
 * sequencer gives. Its own order needs the durations of an earlier run on the same machine
 * (node_modules/.vite/vitest); CI starts from a clean clone without them, so it fell back to
 * the largest files first, and the longest files (90 s of waiting on PostgreSQL, promtool,
 * drains) could start in the last minutes and run alone at the end while the other workers
 * idled. The durations here are CI's, committed in .ci/test-times.json (`.ci/run` writes a
 * fresh one to .tmp/test-times.json after each run: copy it over when the order drifts).
 *
 * Order: by the committed duration, longest first; then by this machine's cache where the
 * committed file has no entry; a file known to neither (a new one) counts as the median,
 * which puts it among the files of ordinary length. Ties keep the path order, so two runs
 * give the same order. Which files run is not changed, only when each starts.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** `.ci/test-times.json`: test file (relative to the root, with /) -> seconds. */
export function readTimes(file: string): Map<string, number> {
  if (!existsSync(file)) return new Map();
  const parsed = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  return new Map(Object.entries(parsed).filter((e): e is [string, number] => typeof e[1] === 'number' && Number.isFinite(e[1])));
}

/** Files ordered longest first by `seconds` (undefined: unknown, counted as the median). */
export function longestFirst<T>(files: T[], name: (f: T) => string, seconds: (f: T) => number | undefined): T[] {
  const known = files.map(seconds).filter((s): s is number => s !== undefined).sort((a, b) => a - b);
  const median = known.length === 0 ? 0 : (known[Math.floor(known.length / 2)] ?? 0);
  const keyed = files.map((f) => ({ f, name: name(f), s: seconds(f) ?? median }));
  keyed.sort((a, b) => b.s - a.s || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return keyed.map((k) => k.f);
}

export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const times = readTimes(path.join(root, '.ci', 'test-times.json'));
    const rel = (f: TestSpecification) => path.relative(root, f.moduleId).split(path.sep).join('/');
    const cached = (f: TestSpecification) => {
      const r = this.ctx.cache.getFileTestResults(`${f.project.name}:${rel(f)}`);
      return r && r.duration > 0 ? r.duration / 1000 : undefined;
    };
    return longestFirst(files, rel, (f) => times.get(rel(f)) ?? cached(f));
  }
}
