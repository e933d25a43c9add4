/**
 * The YAML shape of a cronsafe config, as a zod 4 schema. Validation only: defaults that
 * depend on the machine (concurrency), on other keys (queueSize, lock.path) or on where
 * the file lives (relative paths, state.sqlite) are applied by `load.ts`.
 *
 * Every leaf carries its own error text ("expected an integer from 1 to 1024"); the
 * formatter in messages.ts adds the key path, the file and what was actually found.
 * Cross-key rules are checks on the smallest object that holds both keys; those that
 * could be hidden by an unrelated bad sibling run regardless (see `always`).
 */
import * as z from 'zod';
import { PLACEHOLDER_ENV, PLACEHOLDERS, scanPlaceholders } from './placeholders.js';
import { queryParams } from '../ledger/pg-url-query.js';
import {
  always,
  cron,
  ENV_NAME_RE,
  filePath,
  flag,
  glob,
  int,
  K8S_NAME_RE,
  MAX_TIMER_SECONDS,
  NAME_RE,
  noNul,
  oneOf,
  pathTo,
  postgresUrl,
  seconds,
  str,
  timeZone,
  url,
  wellFormedPostgresUrl,
} from './schema-fields.js';


const sourceSchema = z.strictObject({
  directory: pathTo('a directory path'),
  include: z.array(glob, { error: 'expected a list of globs' }).min(1, 'expected a non-empty list of globs').default(['**']),
  exclude: z.array(glob, { error: 'expected a list of globs' }).default([]),
});

const handlerSchema = z
  .strictObject({
    command: z
      // `[sleep, 5]`, `[qc, --workers, 4]`: YAML reads an unquoted 5 as a number, which argv cannot hold.
      .array(z.string({ error: 'expected a string (quote numbers and booleans in YAML: "5", "true")' }).refine(...noNul), { error: 'expected a list of strings (argv)' })
      .min(1, 'expected a non-empty list of strings (argv)')
      .refine((argv) => argv[0] !== '', { message: 'the program (first element) must not be empty', path: [0] })
      .superRefine((argv, ctx) => {
        argv.forEach((arg, i) => {
          for (const bad of scanPlaceholders(arg).unknown) {
            const known = PLACEHOLDERS.map((p) => `{${p}}`).join(' ');
            ctx.addIssue({ code: 'custom', path: [i], message: `unknown placeholder ${bad} (known: ${known})` });
          }
        });
      })
      .optional(),
    module: pathTo('a path to an ES module').optional(),
    timeoutSeconds: seconds(true).default(300),
    killAfterSeconds: seconds(false).default(5),
    maxLogBytes: int(0).default(65536),
    expectOutput: z.boolean({ error: 'expected true or false' }).default(false),
    env: z
      .record(
        z.string().regex(ENV_NAME_RE, 'expected an environment variable name (letters, digits, _; not starting with a digit)'),
        z.string({ error: 'expected a string (quote numbers and booleans in YAML)' }).refine(...noNul),
        { error: 'expected a mapping of NAME: value' },
      )
      // cronsafe sets these for each attempt, over handler.env: a value given here was
      // accepted and never seen (CRONSAFE_OUTPUT_PATH without output.directory: not set at
      // all, so a handler writing to it failed every item, each charged until dead).
      .superRefine((env, ctx) => {
        for (const name of Object.keys(env)) {
          const what = Object.hasOwn(PLACEHOLDER_ENV, name) ? PLACEHOLDER_ENV[name] : undefined;
          if (what !== undefined) ctx.addIssue({ code: 'custom', path: [name], message: `cannot be set: cronsafe sets it for each attempt (${what}), whatever handler.env says; use another name` });
        }
      })
      .default({}),
  })
  .superRefine((h, ctx) => {
    if ((h.command === undefined) === (h.module === undefined)) {
      const found = h.command === undefined ? 'neither' : 'both';
      ctx.addIssue({ code: 'custom', message: `expected exactly one of command or module, got ${found}` });
    }
  }, always);

const leaseSchema = z
  .strictObject({ seconds: seconds(true).default(90), renewSeconds: seconds(true).default(30) })
  .superRefine((l, ctx) => {
    if (l.renewSeconds >= l.seconds) {
      ctx.addIssue({
        code: 'custom',
        path: ['renewSeconds'],
        message: `must be less than lease.seconds (${l.seconds}), got ${l.renewSeconds}`,
      });
    }
  });

/**
 * Not a timer (a retry time in the ledger), but bounded all the same: a retry time past
 * what a Date holds (about 8.6e12 s from 1970) failed every run with "Invalid time value".
 */
const MAX_BACKOFF_SECONDS = 100 * 365 * 86_400;
const backoffSeconds = () =>
  z.number({ error: `expected a number of seconds >= 0 and <= ${MAX_BACKOFF_SECONDS} (100 years)` }).nonnegative().max(MAX_BACKOFF_SECONDS);

/** A URL's path ("" when it does not parse: the URL check reports that). */
function pathOf(url: string): string {
  try {
    return new URL(url).pathname;
  } catch {
    return '';
  }
}

const GRACE_ERROR = 'expected a number of seconds > 0 (0 would refuse every fire as stale; leave the key out for no grace window)';

const retrySchema = z
  .strictObject({
    maxAttempts: int(1).default(5),
    backoffSeconds: backoffSeconds().default(30),
    backoffMaxSeconds: backoffSeconds().default(3600),
  })
  .superRefine((r, ctx) => {
    if (r.backoffMaxSeconds < r.backoffSeconds) {
      ctx.addIssue({
        code: 'custom',
        path: ['backoffMaxSeconds'],
        message: `must be >= retry.backoffSeconds (${r.backoffSeconds}), got ${r.backoffMaxSeconds}`,
      });
    }
  });

/**
 * The least drain.marginSeconds that works. After the drain's deadline (grace - margin) the
 * margin kills the handlers (a third of it, at least 0.2 s), hands their claims back and
 * exits; the drain's last resort (cli.ts) exits a sixth of it (at least a quarter of a
 * second, or a third if less) before the grace period ends. With 0 that last resort fired at
 * the grace period itself, with the kubelet's SIGKILL (137): the claims were left to their
 * lease and charged. Below a second a loaded node's delays (0.15 s measured) eat what is left.
 */
export const MIN_DRAIN_MARGIN_SECONDS = 1;

const drainSchema = z
  .strictObject({ gracePeriodSeconds: seconds(true).default(30), marginSeconds: seconds(false).default(5) })
  .superRefine((d, ctx) => {
    if (d.marginSeconds < MIN_DRAIN_MARGIN_SECONDS) {
      ctx.addIssue({
        code: 'custom',
        path: ['marginSeconds'],
        message:
          `must be at least ${MIN_DRAIN_MARGIN_SECONDS} (seconds), got ${d.marginSeconds}: after the drain's deadline the margin kills the handlers, hands their claims back and exits before the kubelet's SIGKILL, ` +
          `and the drain's last resort exits a sixth of it before drain.gracePeriodSeconds; with less, that exit comes with the SIGKILL and the claims are charged`,
      });
      return;
    }
    // The margin is what is left after the drain deadline to hand claims back and exit
    // before the kubelet's SIGKILL; margin >= grace leaves no time to drain at all.
    if (d.marginSeconds >= d.gracePeriodSeconds) {
      ctx.addIssue({
        code: 'custom',
        path: ['marginSeconds'],
        message: `must be less than drain.gracePeriodSeconds (${d.gracePeriodSeconds}), got ${d.marginSeconds}`,
      });
    }
  });

/** state.schema's default (open.ts's DEFAULT_POSTGRES_SCHEMA). */
const DEFAULT_SCHEMA = 'cronsafe';

/**
 * URL parameters other tools choose a schema with (Prisma's `schema`, JDBC's `currentSchema`,
 * `search_path`). The pg driver ignores them: the ledger is in state.schema whatever they say,
 * so two releases of one job told apart only by `?schema=` shared one ledger and one run lock.
 */
const SCHEMA_PARAMS = /^(schema|currentschema|search_path)$/i;

/**
 * The schema a parameter's value chooses: the first of its list (search_path and JDBC's
 * currentSchema take one) that is not `$user`; undefined for PostgreSQL's own default
 * (`"$user", public`), or `public` alone (Prisma's `?schema=public`, the URL a Prisma app's
 * DATABASE_URL has): they choose no schema of their own, as a URL without them, and were
 * refused with the advice to put the ledger in `public`.
 */
function chosenSchema(value: string, server = false): string | undefined {
  const first = value
    .split(',')
    .map((n) => n.trim())
    // As the server reads a search_path (options=): a name not in double quotes is folded to
    // lower case (ASCII only), so `-c search_path=CronSafe` is schema cronsafe.
    .map((n) => (/^"(.*)"$/s.test(n) ? n.slice(1, -1) : server ? n.replace(/[A-Z]+/g, (c) => c.toLowerCase()) : n))
    .find((n) => n !== '$user');
  return first === undefined || first === '' || first === 'public' ? undefined : first;
}

/**
 * The search_path an `options` value sets (`-c search_path=x`, `-csearch_path=x`,
 * `--search_path=x`), as the server reads it: words split at blanks not escaped by `\`, `-`
 * for `_` in the name, the last one given; undefined when it sets none. libpq's way to choose
 * a schema in a URL (`?options=-csearch_path%3Dx`): the session's search_path is
 * set, but every statement of cronsafe names state.schema, so it chooses nothing either.
 */
function optionsSearchPath(options: string): string | undefined {
  const words = (options.match(/(?:\\.|[^\s\\])+/gs) ?? []).map((w) => w.replace(/\\(.)/gs, '$1'));
  let found: string | undefined;
  for (let i = 0; i < words.length; i++) {
    let word = words[i]!;
    if (word === '-c') word = words[++i] ?? '';
    else if (/^-c|^--/.test(word)) word = word.slice(2);
    else continue;
    const eq = word.indexOf('=');
    if (eq > 0 && word.slice(0, eq).replace(/-/g, '_').toLowerCase() === 'search_path') found = word.slice(eq + 1);
  }
  return found;
}

/** A schema chosen elsewhere than state.schema: where (a URL parameter, or options' search_path), as written, and the schema. */
interface OtherSchema {
  param: string;
  value: string;
  chosen: string;
}

/** The message for an OtherSchema: exit 78 naming state.postgres and state.schema. */
function otherSchemaMessage(other: OtherSchema, schema: string): string {
  const inOptions = other.param === 'options';
  const where = inOptions ? "search_path in the URL's options=" : `${other.param}= parameter`;
  const why = inOptions ? "the session's search_path is set, but cronsafe names its schema in every statement" : 'the pg driver ignores it';
  return `expected no ${where} naming another schema than state.schema (${JSON.stringify(schema)}), got ${inOptions ? 'search_path' : other.param}=${JSON.stringify(other.value)}: ${why}, and the ledger would be in schema ${JSON.stringify(schema)}, shared with any other job of this name that uses it; set state.schema: ${JSON.stringify(other.chosen)} instead`;
}

/** An `options` value whose search_path names another schema than `schema`, or undefined. */
function optionsSchema(options: string, schema: string): OtherSchema | undefined {
  const value = optionsSearchPath(options);
  const chosen = value === undefined || value === schema ? undefined : chosenSchema(value, true);
  return chosen === undefined || chosen === schema ? undefined : { param: 'options', value: value!, chosen };
}

/** The first such parameter naming another schema than `schema`, or undefined. */
function urlSchemaParam(url: string, schema: string): OtherSchema | undefined {
  const params = queryParams(url);
  for (const [param, value] of params) {
    if (!SCHEMA_PARAMS.test(param) || value === schema) continue;
    const chosen = chosenSchema(value);
    if (chosen !== undefined && chosen !== schema) return { param, value, chosen };
  }
  // The last options= is the one that reaches the server (connection.ts takeOptions).
  const options = params.getAll('options').at(-1);
  return options ? optionsSchema(options, schema) : undefined;
}

const stateSchema = z
  .strictObject({
    sqlite: filePath('<name>.db').optional(),
    postgres: postgresUrl('a postgres:// or postgresql:// URL').optional(),
    // An identifier, because it is spliced into SQL (identifiers cannot be bound).
    schema: str('a schema name')
      .regex(/^[a-z_][a-z0-9_]*$/, 'expected a lowercase SQL identifier: letters, digits and "_", not starting with a digit')
      .max(63, 'expected at most 63 characters (PostgreSQL identifier limit)')
      // CREATE SCHEMA refuses pg_* (a server error, exit 1, on every retry of the Job);
      // information_schema takes tables, but pg_dump leaves them out of every backup.
      .refine((s) => !s.startsWith('pg_') && s !== 'information_schema', {
        error: (iss) => `expected a name PostgreSQL does not keep for itself (pg_* and information_schema are reserved), got ${JSON.stringify(iss.input)}`,
      })
      .optional(),
    allowNetworkFilesystem: z.boolean({ error: 'expected true or false' }).default(false),
  })
  .superRefine((s, ctx) => {
    if (s.sqlite !== undefined && s.postgres !== undefined) {
      ctx.addIssue({ code: 'custom', message: 'expected at most one of sqlite or postgres, got both' });
    }
    // Not in a URL refused as malformed: its "parameter" may be a piece of the password, which the message would quote.
    const other = typeof s.postgres === 'string' && wellFormedPostgresUrl(s.postgres) ? urlSchemaParam(s.postgres, s.schema ?? DEFAULT_SCHEMA) : undefined;
    if (other !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['postgres'], message: otherSchemaMessage(other, s.schema ?? DEFAULT_SCHEMA) });
    }
  });

/**
 * The opt-in Kubernetes Lease lock. The mapping's presence turns it on (`enabled`
 * defaults to true inside it), as the Helm chart renders just `kubernetesLease: {name}`.
 * Timing defaults to the claim lease's (`lease.*`): checked against it at the top level.
 */
const kubernetesLeaseSchema = z
  .strictObject({
    enabled: flag().default(true),
    name: str('a Lease name')
      .max(253, 'expected at most 253 characters')
      .regex(K8S_NAME_RE, 'expected a Kubernetes object name: lowercase letters, digits, "-" and ".", starting and ending with a letter or digit, as does each part between dots')
      .optional(),
    namespace: str('a namespace')
      .max(63, 'expected at most 63 characters')
      .regex(NAME_RE, 'expected a Kubernetes namespace: lowercase letters, digits and "-", starting and ending with a letter or digit')
      .optional(),
    // An int32 in the Lease's spec.leaseDurationSeconds.
    durationSeconds: int(1, MAX_TIMER_SECONDS).optional(),
    renewSeconds: seconds(true).optional(),
  })
  .superRefine((l, ctx) => {
    if (l.durationSeconds !== undefined && l.renewSeconds !== undefined && l.renewSeconds >= l.durationSeconds) {
      ctx.addIssue({
        code: 'custom',
        path: ['renewSeconds'],
        message: `must be less than lock.kubernetesLease.durationSeconds (${l.durationSeconds}), got ${l.renewSeconds}`,
      });
    }
  });

/**
 * What the ledger keeps (docs/configuration.md). On by default: a job that fires every 5
 * minutes runs ~105,000 times a year. At least RETENTION_MIN_RUNS runs are kept because
 * status shows the newest 10 and the failure-streak gauge reads the newest 20.
 */
export const RETENTION_MIN_RUNS = 20;
const retentionSchema = z.strictObject({
  runs: int(RETENTION_MIN_RUNS, 10_000_000).default(1000),
  days: int(1, 36_500).default(30),
  forgetMissingAfterDays: int(1, 36_500).default(30),
});

/** The whole file. Objects are strict: an unknown key is always an error. */
export const configSchema = z
  .strictObject({
    name: str('a name').max(52, 'expected at most 52 characters').regex(
      NAME_RE,
      'expected lowercase letters, digits and "-", starting and ending with a letter or digit',
    ),
    source: sourceSchema,
    handler: handlerSchema,
    output: z.strictObject({ directory: pathTo('a directory path') }).optional(),
    state: stateSchema.prefault({}),
    concurrency: int(1, 1024).optional(),
    queueSize: int(1).optional(),
    // prefault (not default): the {} goes through the object schema, so its own defaults apply.
    lease: leaseSchema.prefault({}),
    retry: retrySchema.prefault({}),
    drain: drainSchema.prefault({}),
    lock: z
      .strictObject({
        path: filePath('<name>.lock').optional(),
        allowNetworkFilesystem: flag().default(false),
        kubernetesLease: kubernetesLeaseSchema.optional(),
      })
      .prefault({}),
    schedule: z
      .strictObject({
        cron,
        timeZone: timeZone.optional(),
        graceSeconds: z.number({ error: GRACE_ERROR }).positive({ error: GRACE_ERROR }).optional(),
        refresh: oneOf(['never', 'every-occurrence', 'on-change']).default('never'),
        repeatedFire: oneOf(['run', 'skip']).default('run'),
      })
      .optional(),
    daemon: z
      .strictObject({
        tickSeconds: seconds(true).default(30),
        growth: z
          .strictObject({
            enabled: z.boolean({ error: 'expected true or false' }).default(false),
            cooldownSeconds: seconds(false).default(300),
            maxIncompletePasses: int(1, 1000).default(3),
          })
          .prefault({}),
      })
      .prefault({}),
    metrics: z
      .strictObject({
        port: int(1, 65535).optional(),
        pushgateway: url(['http:', 'https:'], 'an http:// or https:// URL')
          // The push client (prom-client) drops a query and a fragment: a `?token=` would
          // never reach the gateway, and every push would fail. The value is not echoed: it
          // may hold that token.
          .refine((v) => !/[?#]/.test(v), {
            error: 'expected a URL without a query string or fragment: the push does not send them (credentials go in user:password@)',
          })
          // cronsafe adds /metrics/job/<name> itself: the gateway's push URL as its README
          // writes it (http://gw:9091/metrics/job/x) became .../metrics/job/x/metrics/job/<name>,
          // which the gateway refuses (400) at every push.
          .refine((v) => !/(^|\/)metrics\/job(\/|$)/.test(pathOf(v)), {
            error: 'expected the Pushgateway\'s base URL (http://host:9091, or the route prefix it is served under), without /metrics/job/...: cronsafe adds /metrics/job/<name> itself',
          })
          .optional(),
        pushIntervalSeconds: seconds(true).default(30),
      })
      .optional(),
    events: z.strictObject({ enabled: flag().default(false) }).optional(),
    retention: retentionSchema.prefault({}),
    scheduledTimestamp: z.strictObject({ enabled: flag().default(false) }).optional(),
    log: z
      .strictObject({
        level: oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
        format: oneOf(['json', 'pretty']).default('json'),
      })
      .prefault({}),
  })
  .superRefine((c, ctx) => {
    // Runs on unvalidated input too (see `always`), hence the shape checks.
    if (c.output === undefined && (c.handler as { expectOutput?: unknown } | undefined)?.expectOutput === true) {
      ctx.addIssue({ code: 'custom', path: ['handler', 'expectOutput'], message: 'true needs output.directory (the output it expects goes there)' });
    }
    const argv: unknown = (c.handler as { command?: unknown } | undefined)?.command;
    if (c.output !== undefined || !Array.isArray(argv)) return;
    argv.forEach((arg: unknown, i) => {
      if (typeof arg === 'string' && scanPlaceholders(arg).known.includes('output')) {
        ctx.addIssue({
          code: 'custom',
          path: ['handler', 'command', i],
          message: '{output} is used but output.directory is not set',
        });
      }
    });
  }, always)
  .superRefine((c, ctx) => {
    // The Lease's timing defaults to lease.*; one side set explicitly can disagree with it.
    const kl = c.lock.kubernetesLease;
    if (!kl?.enabled || (kl.durationSeconds !== undefined) === (kl.renewSeconds !== undefined)) return;
    const at = ['lock', 'kubernetesLease'];
    if (kl.renewSeconds !== undefined && kl.renewSeconds >= Math.ceil(c.lease.seconds)) {
      ctx.addIssue({
        code: 'custom',
        path: [...at, 'renewSeconds'],
        message: `must be less than the Lease duration (${Math.ceil(c.lease.seconds)}, from lease.seconds), got ${kl.renewSeconds}`,
      });
    }
    if (kl.durationSeconds !== undefined && c.lease.renewSeconds >= kl.durationSeconds) {
      ctx.addIssue({
        code: 'custom',
        path: [...at, 'durationSeconds'],
        message: `must be greater than the renewal interval (${c.lease.renewSeconds}, from lease.renewSeconds), got ${kl.durationSeconds}`,
      });
    }
  });

/** What the YAML may contain (before defaults). */
export type ConfigInput = z.input<typeof configSchema>;
/** The validated file, static defaults applied, paths not yet resolved. */
export type ParsedConfig = z.output<typeof configSchema>;

