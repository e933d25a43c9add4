#!/usr/bin/env node
// A small, real handler: quality-checks a Scenarist (.scc) caption file and writes a JSON
// report to the output path. argv: <input> <output>. Exit 0 = pass, 1 = the file is bad.
import { readFileSync, writeFileSync } from 'node:fs';

const [input, output] = process.argv.slice(2);
const text = readFileSync(input, 'latin1');
// [line number in the file, text] of each non-blank line (SCC puts a blank line between cues).
const lines = text
  .split(/\r?\n/)
  .map((l, i) => [i + 1, l])
  .filter(([, l]) => l.trim() !== '');
const problems = [];
const header = lines[0]?.[1];
if (header !== 'Scenarist_SCC V1.0') problems.push(`missing "Scenarist_SCC V1.0" header (found ${JSON.stringify(header?.slice(0, 30) ?? '')})`);
const cue = /^(\d\d):(\d\d):(\d\d)[:;](\d\d)\t([0-9a-f]{4})( [0-9a-f]{4})*$/i;
let last = -1;
let cues = 0;
for (const [no, line] of lines.slice(1)) {
  const m = cue.exec(line);
  if (!m) {
    problems.push(`line ${no}: not a timecode + hex words: ${JSON.stringify(line.slice(0, 40))}`);
    continue;
  }
  const t = ((+m[1] * 60 + +m[2]) * 60 + +m[3]) * 30 + +m[4];
  if (t <= last) problems.push(`line ${no}: timecode goes backwards`);
  last = t;
  cues++;
}
if (problems.length > 0) {
  process.stderr.write(`${problems.slice(0, 3).join('; ')}\n`);
  process.exit(1);
}
writeFileSync(output, `${JSON.stringify({ file: process.env.CRONSAFE_ITEM_ID, cues, verdict: 'pass' })}\n`);
process.stdout.write(`${process.env.CRONSAFE_ITEM_ID}: ${cues} cues OK\n`);
