// The handler's argv placeholders: which `{name}`s the exec handler expands (the schema checks them).

/** Handler argv placeholders (DESIGN.md). */
export const PLACEHOLDERS = ['path', 'id', 'output', 'attempt'] as const;
export type Placeholder = (typeof PLACEHOLDERS)[number];

/** The variable each placeholder's value also reaches a command handler in (runner/handlers/exec.ts), and what it is. */
export const PLACEHOLDER_ENV: Readonly<Record<string, string>> = {
  CRONSAFE_ITEM_PATH: "the item's absolute path, {path}",
  CRONSAFE_ITEM_ID: "the item's id, {id}",
  CRONSAFE_OUTPUT_PATH: "the attempt's output temp path, {output}, set only with output.directory",
  CRONSAFE_ATTEMPT: 'the attempt number, {attempt}',
};

const BRACED_RE = /\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/**
 * The `{name}`s in one handler argument, split as the exec handler will treat them: a
 * known name is expanded wherever it appears (even inside `${...}`); an unknown one is
 * an error, unless written `${name}`, which is shell syntax for a child `sh -c` (in
 * YAML `$${name}`, to get past interpolation) and is passed through untouched.
 */
export function scanPlaceholders(arg: string): { known: Placeholder[]; unknown: string[] } {
  const known: Placeholder[] = [];
  const unknown: string[] = [];
  for (const m of arg.matchAll(BRACED_RE)) {
    const name = m[1] ?? '';
    if ((PLACEHOLDERS as readonly string[]).includes(name)) known.push(name as Placeholder);
    else if (arg[(m.index ?? 0) - 1] !== '$') unknown.push(m[0]);
  }
  return { known, unknown };
}
