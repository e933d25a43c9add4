const r0 = process.cpuUsage(); const t0 = performance.now();
const m = await import(process.argv[2]);
const t1 = performance.now(); const r1 = process.cpuUsage(r0);
console.log(process.argv[2].padEnd(40), (t1-t0).toFixed(1).padStart(7), 'ms wall', ((r1.user+r1.system)/1000).toFixed(1).padStart(7), 'ms cpu');
