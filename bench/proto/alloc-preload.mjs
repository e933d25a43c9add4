// Profiling aid: `node --import ./bench/proto/alloc-preload.mjs dist/cli.js run ...` samples
// every allocation of the process (collected objects included) and prints the top sites at exit.
import { Session } from 'node:inspector';
const session = new Session();
session.connect();
session.post('HeapProfiler.startSampling', { samplingInterval: 2048, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
process.on('exit', () => {
  session.post('HeapProfiler.stopSampling', (err, r) => {
    if (err) return;
    const by = new Map();
    let total = 0;
    const walk = (n) => {
      const cf = n.callFrame;
      const key = `${cf.functionName || '(anon)'} ${cf.url.replace(/.*\/(dist|node_modules|bench)\//, '$1/')}:${cf.lineNumber + 1}`;
      if (n.selfSize) { by.set(key, (by.get(key) ?? 0) + n.selfSize); total += n.selfSize; }
      for (const c of n.children ?? []) walk(c);
    };
    walk(r.profile.head);
    process.stderr.write(`ALLOC sampled ${(total / 1e6).toFixed(1)} MB\n`);
    for (const [k, v] of [...by].sort((a, b) => b[1] - a[1]).slice(0, 35)) process.stderr.write(`ALLOC ${((v / total) * 100).toFixed(1).padStart(5)}% ${k}\n`);
  });
});
