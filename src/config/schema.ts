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
import { parseCron } from '../schedule/cron.js';
import { assertTimeZone } from '../schedule/zone.js';
import { describeValue } from './messages.js';

// zod compiles a fast path per object schema (new Function) on its first parse; a config is
// parsed once per process, so compiling costs more than it saves (~8 ms of every start-up,
// docs/benchmarks.md). zod is used for nothing else.
z.config({ jitless: true });

/** Handler argv placeholders (DESIGN.md). */
export const PLACEHOLDERS = ['path', 'id', 'output', 'attempt'] as const;
export type Placeholder = (typeof PLACEHOLDERS)[number];

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

/** Node clamps timers above 2^31-1 ms to 1 ms, so a longer timeout would fire at once. */
export const MAX_TIMER_SECONDS = 2_147_483;

export const NAME_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

const int = (min: number, max?: number) => {
  const error = max === undefined ? `expected an integer >= ${min}` : `expected an integer from ${min} to ${max}`;
  const s = z.int({ error }).min(min);
  return max === undefined ? s : s.max(max);
};

/** Seconds: `positive` excludes 0; every value is capped so it is usable as a timer. */
const seconds = (positive: boolean) => {
  const lo = positive ? '> 0' : '>= 0';
  const error = `expected a number of seconds ${lo} and <= ${MAX_TIMER_SECONDS}`;
  const s = z.number({ error }).max(MAX_TIMER_SECONDS);
  return positive ? s.positive() : s.nonnegative();
};

const str = (what = 'a non-empty string') => z.string({ error: `expected ${what}` }).min(1);

const oneOf = <const T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { error: `expected one of ${values.map((v) => JSON.stringify(v)).join(', ')}` });

/** A refine's error text with the found value, as the formatter adds it for built-in checks. */
const got = (expected: string) => (iss: { input?: unknown }) => `${expected}, got ${describeValue(iss.input)}`;

/**
 * Run a cross-key check even when a sibling key has an issue (zod skips it by default),
 * so one run reports every problem; but only on a mapping, since the check reads its
 * keys. Such checks see unvalidated values and must not trust their types.
 */
const always = {
  when: (p: { value: unknown }) => typeof p.value === 'object' && p.value !== null && !Array.isArray(p.value),
};

const url = (protocols: string[], what: string) =>
  str(what).refine(
    (v) => {
      try {
        return protocols.includes(new URL(v).protocol);
      } catch {
        return false;
      }
    },
    { error: got(`expected ${what}`) },
  );

/** Globs are matched against ids, which are relative and never climb out of the directory. */
const glob = str('a glob relative to source.directory').refine(
  (g) => !g.startsWith('/') && !g.split('/').includes('..'),
  { error: got('expected a glob relative to source.directory (no leading "/", no ".." segment)') },
);

const sourceSchema = z.strictObject({
  directory: str('a directory path'),
  include: z.array(glob, { error: 'expected a list of globs' }).min(1, 'expected a non-empty list of globs').default(['**']),
  exclude: z.array(glob, { error: 'expected a list of globs' }).default([]),
});

const handlerSchema = z
  .strictObject({
    command: z
      .array(z.string({ error: 'expected a string' }), { error: 'expected a list of strings (argv)' })
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
    module: str('a path to an ES module').optional(),
    timeoutSeconds: seconds(true).default(300),
    killAfterSeconds: seconds(false).default(5),
    maxLogBytes: int(0).default(65536),
    expectOutput: z.boolean({ error: 'expected true or false' }).default(false),
    env: z
      .record(
        z.string().regex(ENV_NAME_RE, 'expected an environment variable name (letters, digits, _; not starting with a digit)'),
        z.string({ error: 'expected a string (quote numbers and booleans in YAML)' }),
        { error: 'expected a mapping of NAME: value' },
      )
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

const retrySchema = z
  .strictObject({
    maxAttempts: int(1).default(5),
    backoffSeconds: z.number({ error: 'expected a number of seconds >= 0' }).nonnegative().default(30),
    backoffMaxSeconds: z.number({ error: 'expected a number of seconds >= 0' }).nonnegative().default(3600),
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

const drainSchema = z
  .strictObject({ gracePeriodSeconds: seconds(true).default(30), marginSeconds: seconds(false).default(5) })
  .superRefine((d, ctx) => {
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

/**
 * The schedule module's own parser and zone check, so `cronsafe validate` accepts exactly
 * what the scheduler runs: 5 fields or an @macro, field ranges, case-sensitive IANA zones
 * as Kubernetes' spec.timeZone wants them. Their messages already name the bad value.
 */
const fromThrow = (check: (v: string) => unknown) => (v: string, ctx: z.RefinementCtx) => {
  try {
    check(v);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
  }
};
const cron = str('a cron expression').superRefine(fromThrow(parseCron));
const timeZone = str('an IANA time zone name').superRefine(fromThrow(assertTimeZone));

const stateSchema = z
  .strictObject({
    sqlite: str('a file path').optional(),
    postgres: url(['postgres:', 'postgresql:'], 'a postgres:// or postgresql:// URL').optional(),
    // An identifier, because it is spliced into SQL (identifiers cannot be bound).
    schema: str('a schema name')
      .regex(/^[a-z_][a-z0-9_]*$/, 'expected a lowercase SQL identifier: letters, digits and "_", not starting with a digit')
      .max(63, 'expected at most 63 characters (PostgreSQL identifier limit)')
      .optional(),
    allowNetworkFilesystem: z.boolean({ error: 'expected true or false' }).default(false),
  })
  .superRefine((s, ctx) => {
    if (s.sqlite !== undefined && s.postgres !== undefined) {
      ctx.addIssue({ code: 'custom', message: 'expected at most one of sqlite or postgres, got both' });
    }
  });

/** Kubernetes object names (DNS-1123 subdomain) and namespaces (DNS-1123 label). */
const K8S_NAME_RE = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const flag = () => z.boolean({ error: 'expected true or false' });

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
      .regex(K8S_NAME_RE, 'expected a Kubernetes object name: lowercase letters, digits, "-" and ".", starting and ending with a letter or digit')
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
    output: z.strictObject({ directory: str('a directory path') }).optional(),
    state: stateSchema.prefault({}),
    concurrency: int(1, 1024).optional(),
    queueSize: int(1).optional(),
    // prefault (not default): the {} goes through the object schema, so its own defaults apply.
    lease: leaseSchema.prefault({}),
    retry: retrySchema.prefault({}),
    drain: drainSchema.prefault({}),
    lock: z
      .strictObject({
        path: str('a file path').optional(),
        allowNetworkFilesystem: flag().default(false),
        kubernetesLease: kubernetesLeaseSchema.optional(),
      })
      .prefault({}),
    schedule: z
      .strictObject({
        cron,
        timeZone: timeZone.optional(),
        graceSeconds: z.number({ error: 'expected a number of seconds >= 0' }).nonnegative().optional(),
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
        pushgateway: url(['http:', 'https:'], 'an http:// or https:// URL').optional(),
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
    def = next._zod.def as WalkDef;
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
      def.type === 'object' ? def.shape?.[String(seg)]
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
