#!/usr/bin/env node
// `npm run demo`: makes a sample backlog of caption files (a few deliberately corrupt),
// runs the real CLI over it on the embedded default (SQLite, local directories), then
// shows `cronsafe status` and `cronsafe dead-letter list`. Re-running it shows a second
// pass skipping everything already done.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const work = path.resolve(process.env.DEMO_DIR ?? path.join(root, '.demo'));
const cli = path.join(root, 'dist/cli.js');
const ITEMS = Number(process.env.DEMO_ITEMS ?? 200);

function scc(i) {
  const cues = [];
  for (let c = 0; c < 5; c++) {
    const s = 10 + c * 3 + (i % 7);
    cues.push(`00:00:${String(s).padStart(2, '0')}:00\t9420 9420 94ae 94ae 9452 9452 97a1 97a1`);
  }
  return `Scenarist_SCC V1.0\n\n${cues.join('\n\n')}\n`;
}

const queue = path.join(work, 'queue');
if (!existsSync(queue)) {
  for (let i = 0; i < ITEMS; i++) {
    const show = `show-${String(i % 10).padStart(2, '0')}`;
    mkdirSync(path.join(queue, show), { recursive: true });
    let body = scc(i);
    if (i % 50 === 7) body = 'this is not a caption file\n'; // corrupt: no header
    if (i % 50 === 23) body = body.replace('00:00:1', 'xx:00:1'); // corrupt: bad timecode
    writeFileSync(path.join(queue, show, `episode-${String(i).padStart(4, '0')}.scc`), body);
  }
}
const config = path.join(work, 'cronsafe.yaml');
writeFileSync(
  config,
  `# Written by examples/demo/run-demo.mjs
name: caption-qc
source:
  directory: ./queue
  include: ["**/*.scc"]
handler:
  command: ["${process.execPath}", "${path.join(here, 'caption-qc.mjs')}", "{path}", "{output}"]
  timeoutSeconds: 30
output:
  directory: ./out
state:
  sqlite: ./state/cronsafe.db
concurrency: 4
retry: {maxAttempts: 2, backoffSeconds: 0, backoffMaxSeconds: 0}
log: {level: ${process.env.DEMO_LOG_LEVEL ?? 'info'}, format: ${process.stdout.isTTY ? 'pretty' : 'json'}}
`,
);

const run = (args) => spawnSync(process.execPath, [cli, ...args, '-c', config], { stdio: 'inherit' }).status;
console.log(`\n== cronsafe run -c ${path.relative(process.cwd(), config)}   (${ITEMS} caption files, a few corrupt)\n`);
const code = run(['run']);
console.log(`\n== exit code ${code}\n\n== cronsafe status\n`);
run(['status']);
console.log('\n== cronsafe dead-letter list\n');
run(['dead-letter', 'list']);
console.log(`\nOutputs are in ${path.join(work, 'out')}; run \`npm run demo\` again to see a second pass skip what is done.`);
process.exit(code ?? 1);
