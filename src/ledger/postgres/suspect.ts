/**
 * Suspects on PostgreSQL, as on SQLite (src/ledger/sqlite/claim.ts): an item charged twice
 * or more, the last time by a run that died while it ran (recover.ts writes that last error:
 * its lease expired, or the run that claimed it died). Nothing can tell which of the
 * attempts a dead pod had in flight killed it (an out-of-memory kill, a segfault), so a pod
 * runs one suspect at a time (claim.ts): the item that kills the process is then charged
 * alone, and the good items that happened to run beside it twice are not dead-lettered with
 * it. A suspect that fails or succeeds on its own is an ordinary item again; one handed back
 * (a drain, a stray claim) stays a suspect.
 *
 * `t` is the table's alias. SUSPECT is, word for word, the predicate of the items_suspect
 * index (migration 005), so that the planner proves the index usable for the claim.
 */
export const suspect = (t: string): string => `${t}.attempts - ${t}.released >= 2 AND ${t}.last_error LIKE 'attempt % abandoned: %'`;

/** A claimed row that was a suspect when it was claimed (the claim added an attempt). */
export const claimedSuspect = (t: string): string => `${t}.attempts - ${t}.released >= 3 AND ${t}.last_error LIKE 'attempt % abandoned: %'`;

/** A hand-back's last error: the reason, unless the claim was a suspect's (then its 'abandoned' error stays). */
export const handBackError = (t: string, reason: string): string => `CASE WHEN ${claimedSuspect(t)} THEN ${t}.last_error ELSE ${reason} END`;
