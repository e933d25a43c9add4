import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { ROOT } from './cli.js';

export type Obj = Record<string, unknown>;

/** The Markdown files a user copies configs and values from. */
export const DOC_FILES = ['README.md', 'helm/cronsafe/README.md', ...readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];

export interface YamlBlock { where: string; text: string; doc: Obj }

/** The ```yaml blocks of the docs, each with the file and line it starts on. */
export function docYamlBlocks(files: string[] = DOC_FILES): YamlBlock[] {
  return files.flatMap((file) => {
    const lines = readFileSync(path.join(ROOT, file), 'utf8').split('\n');
    const blocks: YamlBlock[] = [];
    for (let i = 0; i < lines.length; i++) {
      const open = /^(\s*)```ya?ml\s*$/.exec(lines[i]!);
      if (!open) continue;
      const indent = open[1]!;
      const body: string[] = [];
      let j = i + 1;
      for (; j < lines.length && !/^\s*```\s*$/.test(lines[j]!); j++) body.push(lines[j]!.startsWith(indent) ? lines[j]!.slice(indent.length) : lines[j]!);
      const text = body.join('\n');
      blocks.push({ where: `${file}:${i + 1}`, text, doc: YAML.parse(text) as Obj });
      i = j;
    }
    return blocks;
  });
}

/** Top-level keys of a cronsafe config. */
export const CONFIG_KEYS = new Set(['name', 'source', 'handler', 'output', 'state', 'concurrency', 'queueSize', 'lease', 'retry', 'drain', 'lock', 'schedule', 'daemon', 'metrics', 'events', 'retention', 'scheduledTimestamp', 'log']);

/** A block of the chart's values (my-values.yaml), not a cronsafe config. */
export const isChartValues = (b: YamlBlock) => ['image', 'config', 'persistence', 'parallelism'].some((k) => k in b.doc);
