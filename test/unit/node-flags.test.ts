import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';

// The bin's shebang and the image's ENTRYPOINT must start node with the same flags
// (--v8-pool-size=1, --heap-growing-percent=10 and the young generation's size keep memory flat
// on long runs at less CPU than --optimize-for-size: docs/benchmarks.md).
/** package.json's bin, relative to the package: what `cronsafe` runs once installed. */
const BIN = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { bin: { cronsafe: string } }).bin.cronsafe;

describe('node flags', () => {
  it('are the same in the bin\'s shebang and the Dockerfile ENTRYPOINT, which runs the bin', () => {
    const shebang = readFileSync(path.join(ROOT, 'src/cli.ts'), 'utf8').split('\n', 1)[0]!;
    const m = /^#!\/usr\/bin\/env -S node(.*)$/.exec(shebang);
    expect(m, shebang).not.toBeNull();
    const flags = m![1]!.trim().split(/\s+/).filter(Boolean);
    expect(flags).toContain('--heap-growing-percent=10');
    expect(flags).not.toContain('--optimize-for-size');
    expect(flags).toContain('--v8-pool-size=1');

    const entry = /^ENTRYPOINT (\[.*\])$/m.exec(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'));
    expect(entry).not.toBeNull();
    const argv = JSON.parse(entry![1]!) as string[];
    const node = argv.indexOf('node');
    const script = argv.indexOf(`/app/${BIN}`);
    expect(script, JSON.stringify(argv)).toBeGreaterThan(node);
    expect(argv.slice(node + 1, script)).toEqual(flags);
    // Whoever sets `command:` from what docs/kubernetes.md says the ENTRYPOINT is keeps the flags.
    expect(readFileSync(path.join(ROOT, 'docs/kubernetes.md'), 'utf8')).toContain(`(\`ENTRYPOINT ${JSON.stringify(argv).replaceAll('","', '", "')}\``);
  });

  it.each([BIN, 'dist/cli.js'])("the built %s needs no `env -S`: it runs where /usr/bin/env is BusyBox's (Alpine, node:*-alpine), with the bin's node flags", (file) => {
    // Before: `#!/usr/bin/env -S node --optimize-for-size ...`. The kernel hands env the rest of
    // the line as one argument, and BusyBox env has no -S: `env: unrecognized option: S`, exit 1,
    // for every command of an `npm install -g cronsafe` on Alpine.
    const bin = path.join(ROOT, file);
    const [first = '', second = ''] = readFileSync(bin, 'utf8').split('\n', 2);
    const m = /^#!\s*(\S+)(?:[ \t]+(.*))?$/.exec(first);
    expect(m, first).not.toBeNull();
    const interpreter = m![1]!;
    const arg = m![2]?.trim();
    // What the kernel runs: the interpreter with the rest of the line as one argument. No
    // interpreter in /bin or /usr/bin takes `-S node --flags` as one word but GNU env.
    expect(arg === undefined || !arg.startsWith('-'), first).toBe(true);
    // The flags reach node all the same (src/cli.ts's shebang names them; the test above pins them).
    const flags = /^#!\/usr\/bin\/env -S node(.*)$/.exec(readFileSync(path.join(ROOT, 'src/cli.ts'), 'utf8').split('\n', 1)[0]!)![1]!.trim();
    expect(`${first}\n${second}`).toContain(`node ${flags} `);
    // Run it as the kernel would, through BusyBox (Alpine's /bin/sh and /usr/bin/env) where it is installed.
    const busybox = spawnSync('busybox', ['true']).status === 0;
    const argv = [...(arg === undefined ? [] : [arg]), bin, '--version'];
    const r = busybox ? spawnSync('busybox', [path.basename(interpreter), ...argv], { encoding: 'utf8' }) : spawnSync(interpreter, argv, { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout.trim()).toBe((JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version);
  });

  it.each([BIN, 'dist/cli.js'])('%s runs through its shebang straight after `npm run build`, as the bin does once installed', (file) => {
    // Before: the build wrote it -rw-r--r--, so `./dist/cli.js` from a checkout failed with EACCES.
    const out = execFileSync(path.join(ROOT, file), ['--version'], { encoding: 'utf8' });
    expect(out.trim()).toBe((JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version);
  });
});
