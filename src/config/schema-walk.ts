import type * as z from 'zod';
import { configSchema } from './schema.js';

/** The definition fields schemaAt() walks through; the rest of zod's def is not needed. */
interface WalkDef {
  type: string;
  innerType?: z.core.$ZodType;
  in?: z.core.$ZodType;
  shape?: Record<string, z.core.$ZodType>;
  element?: z.core.$ZodType;
  valueType?: z.core.$ZodType;
}

function unwrap(s: z.core.$ZodType): WalkDef {
  let def = s._zod.def as WalkDef;
  for (;;) {
    const next = def.innerType ?? (def.type === 'pipe' ? def.in : undefined);
    if (next === undefined) return def;
    def = next._zod.def;
  }
}

/**
 * The schema node that validates the value at `path`, seen through optional/default
 * wrappers; undefined when the path leads nowhere. Used for "did you mean" hints and
 * to know which interpolated strings are meant as numbers.
 */
export function schemaAt(path: readonly PropertyKey[], root: z.core.$ZodType = configSchema): WalkDef | undefined {
  let def = unwrap(root);
  for (const seg of path) {
    const child =
      // Own keys only: `retry: {toString: ...}` names no key, not Object's method.
      def.type === 'object' ? (def.shape !== undefined && Object.hasOwn(def.shape, String(seg)) ? def.shape[String(seg)] : undefined)
      : def.type === 'array' ? def.element
      : def.type === 'record' ? def.valueType
      : undefined;
    if (child === undefined) return undefined;
    def = unwrap(child);
  }
  return def;
}

/** Keys allowed in the mapping at `path` (empty if it is not a mapping). */
export function knownKeysAt(path: readonly PropertyKey[]): string[] {
  const def = schemaAt(path);
  return def?.type === 'object' ? Object.keys(def.shape ?? {}) : [];
}
