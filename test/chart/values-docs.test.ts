/**
 * "Every value is documented where it is defined": each value in values.yaml is covered
 * by a `## @param` line (its own or a parent's, for free-form maps such as resources),
 * each @param names a real value, and values.schema.json describes every documented value.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { CHART, type Obj } from './helpers.js';

const text = readFileSync(path.join(CHART, 'values.yaml'), 'utf8');
const values = YAML.parse(text) as Obj;
const schema = JSON.parse(readFileSync(path.join(CHART, 'values.schema.json'), 'utf8')) as Obj;
const params = [...text.matchAll(/^\s*## @param (\S+) \S/gm)].map((m) => m[1] as string);

const isMap = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Value paths not covered by a @param on themselves or an ancestor. */
function undocumented(node: Obj, prefix: string): string[] {
  return Object.entries(node).flatMap(([k, v]) => {
    const p = prefix ? `${prefix}.${k}` : k;
    if (params.includes(p)) return [];
    return isMap(v) && Object.keys(v).length > 0 ? undocumented(v, p) : [p];
  });
}

function lookup(root: Obj, p: string, step: (node: Obj, key: string) => unknown): unknown {
  return p.split('.').reduce<unknown>((node, key) => (isMap(node) ? step(node, key) : undefined), root);
}

describe('values.yaml documentation', () => {
  it('documents every value with ## @param', () => {
    expect(undocumented(values, '')).toEqual([]);
  });

  it('has no @param for a value that does not exist', () => {
    expect(params.filter((p) => lookup(values, p, (n, k) => n[k]) === undefined)).toEqual([]);
  });

  it('describes every documented value in values.schema.json', () => {
    const inSchema = (p: string) => lookup(schema, p, (n, k) => (n.properties as Obj | undefined)?.[k]) as Obj | undefined;
    expect(params.filter((p) => typeof inSchema(p)?.description !== 'string')).toEqual([]);
  });
});
