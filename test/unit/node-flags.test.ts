import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';

// The bin's shebang and the image's ENTRYPOINT must start node with the same flags
// (--optimize-for-size and --v8-pool-size=1 keep memory flat on long runs: docs/benchmarks.md).
describe('node flags', () => {
  it('are the same in the cli.js shebang and the Dockerfile ENTRYPOINT', () => {
    const shebang = readFileSync(path.join(ROOT, 'src/cli.ts'), 'utf8').split('\n', 1)[0]!;
    const m = /^#!\/usr\/bin\/env -S node(.*)$/.exec(shebang);
    expect(m, shebang).not.toBeNull();
    const flags = m![1]!.trim().split(/\s+/).filter(Boolean);
    expect(flags).toContain('--optimize-for-size');
    expect(flags).toContain('--v8-pool-size=1');

    const entry = /^ENTRYPOINT (\[.*\])$/m.exec(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'));
    expect(entry).not.toBeNull();
    const argv = JSON.parse(entry![1]!) as string[];
    const node = argv.indexOf('node');
    const script = argv.indexOf('/app/dist/cli.js');
    expect(argv.slice(node + 1, script)).toEqual(flags);
    // Whoever sets `command:` from what docs/kubernetes.md says the ENTRYPOINT is keeps the flags.
    expect(readFileSync(path.join(ROOT, 'docs/kubernetes.md'), 'utf8')).toContain(`(\`ENTRYPOINT ${JSON.stringify(argv).replaceAll('","', '", "')}\``);
  });

  it('dist/cli.js runs through its shebang straight after `npm run build`, as the bin does once installed', () => {
    // Before: the build wrote it -rw-r--r--, so `./dist/cli.js` from a checkout failed with EACCES.
    const out = execFileSync(path.join(ROOT, 'dist/cli.js'), ['--version'], { encoding: 'utf8' });
    expect(out.trim()).toBe((JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version);
  });
});
