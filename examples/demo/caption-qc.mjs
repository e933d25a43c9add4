#!/usr/bin/env node
// A small, real handler: quality-checks a Scenarist (.scc) caption file and writes a JSON
// report to the output path. argv: <input> <output>. Exit 0 = pass, 1 = the file is bad.
import { readFileSync, writeFileSync } from 'node:fs';

const [input, output] = process.argv.slice(2);
const text = readFileSync(input, 'latin1');
const lines = text.split(/\r?\n/).filter((l) => l.trim() !== '');
const problems = [];
if (lines[0] !== 'Scenarist_SCC V1.0') problems.push(`missing "Scenarist_SCC V1.0" header (found ${JSON.stringify(lines[0]?.slice(0, 30) ?? '')})`);
const cue = /^(\d\d):(\d\d):(\d\d)[:;](\d\d)\t([0-9a-f]{4})( [0-9a-f]{4})*$/i;
let last = -1;
let cues = 0;
for (const [n, line] of lines.slice(1).entries()) {
  const m = cue.exec(line);
  if (!m) {
    problems.push(`line ${n + 2}: not a timecode + hex words: ${JSON.stringify(line.slice(0, 40))}`);
    continue;
  }
  const t = ((+m[1] * 60 + +m[2]) * 60 + +m[3]) * 30 + +m[4];
  if (t <= last) problems.push(`line ${n + 2}: timecode goes backwards`);
  last = t;
  cues++;
}
if (problems.length > 0) {
  process.stderr.write(`${problems.slice(0, 3).join('; ')}\n`);
  process.exit(1);
}
writeFileSync(output, `${JSON.stringify({ file: process.env.CRONSAFE_ITEM_ID, cues, verdict: 'pass' })}\n`);
process.stdout.write(`${process.env.CRONSAFE_ITEM_ID}: ${cues} cues OK\n`);
