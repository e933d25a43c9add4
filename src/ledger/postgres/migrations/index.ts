import * as m001 from './001-initial.js';
import * as m002 from './002-job-identity-and-heartbeat.js';
import * as m003 from './003-pass-index.js';
import * as m004 from './004-retention.js';
import * as m005 from './005-suspects.js';
import * as m006 from './006-pass-config.js';
import * as m007 from './007-state-check.js';

/** One numbered schema step; `sql` takes the quoted schema name. */
export interface Migration {
  version: number;
  name: string;
  sql: (schema: string) => string;
}

/** Every migration, in the order it must be applied. Append only. */
export const MIGRATIONS: readonly Migration[] = [
  { version: 1, ...m001 },
  { version: 2, ...m002 },
  { version: 3, ...m003 },
  { version: 4, ...m004 },
  { version: 5, ...m005 },
  { version: 6, ...m006 },
  { version: 7, ...m007 },
];
