/**
 * Migration 006 (PostgreSQL): what the running pass was started with (docs/postgres.md,
 * "One config per pass"). No SQLite counterpart: there a run is its own pass.
 *
 * `run_lock.pass_config`: the discovery-relevant config of the pod that started the pass
 * (source.directory, source.include, source.exclude, schedule.refresh, ...), as a JSON
 * object keyed by config key, written with `run_group` by the exclusive holder. A pod of the
 * same run group with another one is refused instead of joining (exit 78): it would scan
 * another set of items into the same pass, forget as gone the items of its siblings, and
 * delete pending rows of earlier passes with their attempt counts. NULL (a pass started by
 * a cronsafe from before this column) is joined as before, unchecked.
 *
 * Append-only: never edit once shipped; add `007-...` instead. `s` is the quoted schema name.
 */
export const name = 'pass-config';

export const sql = (s: string): string => `
ALTER TABLE ${s}.run_lock ADD COLUMN pass_config jsonb;
`;
