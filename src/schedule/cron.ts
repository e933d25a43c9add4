/**
 * Five-field cron expressions, parsed to sets of values.
 *
 * We parse ourselves rather than through croner so that the error says which field is wrong
 * and why, and so that the two details that differ between Vixie cron and robfig/cron (the
 * library behind Kubernetes CronJobs) are both kept: what counts as a "star" day field for the
 * day-of-month / day-of-week OR rule, and the fixed-time vs wildcard split that drives DST.
 */

/** A field of a cron expression, named as in error messages. */
export type CronFieldName = 'minute' | 'hour' | 'day-of-month' | 'month' | 'day-of-week';

/**
 * Vixie cron's DST classification (docs/schedule.md): a schedule is `wildcard` when its minute
 * or hour field starts with `*`, otherwise `fixed-time`.
 */
export type CronKind = 'fixed-time' | 'wildcard';

/** A parsed, validated cron expression. */
export interface CronSpec {
  /** The expression as given (trimmed). */
  readonly source: string;
  /** The five fields after expanding `@daily`-style macros. */
  readonly fields: readonly [string, string, string, string, string];
  /** Allowed values, ascending: minutes 0-59, hours 0-23. */
  readonly minutes: readonly number[];
  readonly hours: readonly number[];
  /** Allowed values: days 1-31, months 1-12, weekdays 0-6 (0 = Sunday; `7` is read as 0). */
  readonly daysOfMonth: ReadonlySet<number>;
  readonly months: ReadonlySet<number>;
  readonly daysOfWeek: ReadonlySet<number>;
  /**
   * The weekdays as robfig reads the field (dayMatches 'robfig'). Its day-of-week ends at 6,
   * so `a/n` (a through the end, every n) stops at Saturday, where Vixie's end, 7, adds a
   * Sunday: `1/2` is Mon, Wed, Fri for a CronJob, Mon, Wed, Fri, Sun in Vixie cron.
   */
  readonly robfigDaysOfWeek: ReadonlySet<number>;
  readonly minuteSet: ReadonlySet<number>;
  readonly hourSet: ReadonlySet<number>;
  /**
   * Whether each day field counts as unrestricted for the OR rule. Vixie looks at the first
   * character (`*` or `*\/2` both count); robfig at its star bit, which a step above 1 clears.
   */
  readonly dayStars: {
    readonly vixie: { readonly dom: boolean; readonly dow: boolean };
    readonly robfig: { readonly dom: boolean; readonly dow: boolean };
  };
  readonly kind: CronKind;
}

/** An invalid cron expression; `field` is absent when the shape (not a field) is wrong. */
export class CronSyntaxError extends Error {
  override name = 'CronSyntaxError';
  constructor(
    message: string,
    readonly field?: CronFieldName,
  ) {
    super(message);
  }
}

const MACROS: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

/** The most days each month can have (February: in a leap year). */
const DAYS_IN_MONTH = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

const MONTH_NAMES = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAY_NAMES = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];

interface FieldRule {
  name: CronFieldName;
  min: number;
  max: number;
  names?: readonly string[];
  /** Value of names[0]: months count from 1, weekdays from 0. */
  nameBase?: number;
  /** Where robfig's field ends, if not at max: the end of an open `a/n` in its reading. */
  robfigMax?: number;
}

const RULES: readonly FieldRule[] = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day-of-month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12, names: MONTH_NAMES, nameBase: 1 },
  // 7 is Sunday in Vixie cron and croner; robfig rejects it, we accept it (and store 0).
  { name: 'day-of-week', min: 0, max: 7, names: DAY_NAMES, nameBase: 0, robfigMax: 6 },
];

interface ParsedField {
  values: Set<number>;
  /** The values as robfig reads the field (differs only where FieldRule.robfigMax is set). */
  robfigValues: Set<number>;
  robfigStar: boolean;
}

/**
 * Parse a five-field cron expression (`minute hour day-of-month month day-of-week`) or one of
 * `@yearly @annually @monthly @weekly @daily @midnight @hourly`. Throws a CronSyntaxError that
 * names the field and the reason, e.g. `minute field "61": value out of range 0-59`.
 */
export function parseCron(expression: string): CronSpec {
  const source = expression.trim();
  if (source === '') throw new CronSyntaxError('cron expression is empty');
  if (/^(CRON_)?TZ=/i.test(source)) {
    throw new CronSyntaxError(`cron expression "${source}": put the zone in schedule.timeZone, not in the expression`);
  }
  let text = source;
  if (source.startsWith('@')) {
    const macro = MACROS[source];
    if (macro === undefined && MACROS[source.toLowerCase()] !== undefined) {
      throw new CronSyntaxError(`cron expression "${source}": macros are lower case (Kubernetes and cron refuse "${source}"): write ${source.toLowerCase()}`);
    }
    if (macro === undefined) {
      throw new CronSyntaxError(
        `cron expression "${source}": unsupported macro (use one of ${Object.keys(MACROS).join(', ')})`,
      );
    }
    text = macro;
  }
  const parts = text.split(/\s+/);
  if (parts.length !== 5) {
    throw new CronSyntaxError(
      `cron expression "${source}": expected 5 fields (minute hour day-of-month month day-of-week), got ${parts.length}`,
    );
  }
  const fields = parts as [string, string, string, string, string];
  const [minute, hour, dom, month, dow] = fields.map((f, i) => parseField(f, RULES[i]!)) as [
    ParsedField,
    ParsedField,
    ParsedField,
    ParsedField,
    ParsedField,
  ];
  for (const days of [dow.values, dow.robfigValues]) if (days.delete(7)) days.add(0);
  const starts = (f: string): boolean => f.startsWith('*') || f.startsWith('?');
  const sorted = (s: Set<number>): number[] => [...s].sort((a, b) => a - b);
  return {
    source,
    fields,
    minutes: sorted(minute.values),
    hours: sorted(hour.values),
    daysOfMonth: dom.values,
    months: month.values,
    daysOfWeek: dow.values,
    robfigDaysOfWeek: dow.robfigValues,
    minuteSet: minute.values,
    hourSet: hour.values,
    dayStars: {
      vixie: { dom: starts(fields[2]), dow: starts(fields[4]) },
      robfig: { dom: dom.robfigStar, dow: dow.robfigStar },
    },
    kind: starts(fields[0]) || starts(fields[1]) ? 'wildcard' : 'fixed-time',
  };
}

/**
 * Throws when `spec` can never fire. With every weekday allowed, a day matches by its day of
 * month alone (in both cron dialects), so "0 0 30 2 *" parses everywhere (Kubernetes takes
 * it) and fires never: a job that silently never runs. The config refuses it; the
 * occurrence functions still answer null for it. `cronsafe daemon` also asks for its own
 * dialect (vixie): `0 0 30 2 *\/2` fires under Kubernetes (OR) but never in the daemon (AND).
 */
export function assertFires(spec: CronSpec, flavour: 'robfig' | 'vixie' = 'robfig'): void {
  // The dialect's own star: robfig's (Kubernetes) bit is set by `*/1` and `?/1` too; Vixie
  // (cronsafe daemon) counts any field that starts with `*`, so `*/2` ANDs there as well.
  if (!spec.dayStars[flavour].dow) return;
  const fits = [...spec.months].some((m) => [...spec.daysOfMonth].some((d) => d <= DAYS_IN_MONTH[m - 1]!));
  if (!fits) throw new CronSyntaxError(`cron expression "${spec.source}": never fires (no month it allows has a day of month it allows)`, 'day-of-month');
}

function parseField(text: string, rule: FieldRule): ParsedField {
  const fail = (why: string): never => {
    throw new CronSyntaxError(`${rule.name} field "${text}": ${why}`, rule.name);
  };
  const values = new Set<number>();
  const robfigValues = new Set<number>();
  let robfigStar = false;
  for (const item of text.split(',')) {
    if (item === '') fail('empty item in list');
    const [range, stepText, extra] = item.split('/');
    if (extra !== undefined) fail(`"${item}" has more than one "/"`);
    let step = 1;
    if (stepText !== undefined) {
      if (!/^\d+$/.test(stepText) || Number(stepText) < 1) fail(`step "${stepText}" must be a whole number of 1 or more`);
      step = Number(stepText);
    }
    let lo: number;
    let hi: number;
    let robfigHi: number;
    if (range === '*' || range === '?') {
      [lo, hi] = [rule.min, rule.max];
      robfigHi = hi; // `*` ends at 7 or 6: both hold Sunday once 7 is read as 0
      // robfig sets its star bit for `*` and `*/1` but clears it for a real step.
      if (step === 1) robfigStar = true;
    } else {
      const bounds = (range ?? '').split('-');
      if (bounds.length > 2) fail(`"${range}" is not a range`);
      lo = parseValue(bounds[0] ?? '', rule, fail);
      // `5/15` means 5-max/15, as in robfig and croner.
      const open = bounds.length === 1 && stepText !== undefined;
      hi = bounds.length === 2 ? parseValue(bounds[1] ?? '', rule, fail) : open ? rule.max : lo;
      robfigHi = open ? (rule.robfigMax ?? rule.max) : hi;
      if (lo > hi) fail(`range start ${lo} is after range end ${hi}`);
    }
    for (let v = lo; v <= hi; v += step) values.add(v);
    for (let v = lo; v <= robfigHi; v += step) robfigValues.add(v);
  }
  return { values, robfigValues, robfigStar };
}

function parseValue(token: string, rule: FieldRule, fail: (why: string) => never): number {
  if (/^\d+$/.test(token)) {
    const n = Number(token);
    if (n < rule.min || n > rule.max) fail(`value out of range ${rule.min}-${rule.max}`);
    return n;
  }
  const index = rule.names?.indexOf(token.toLowerCase()) ?? -1;
  if (index >= 0) return index + (rule.nameBase ?? 0);
  if (token === '') return fail('missing value');
  if (/#|^\d*L$|^\d+W$|^LW$/i.test(token)) return fail(`"${token}": L, W and # are not supported`);
  return fail(`"${token}" is not a number${rule.names ? ' or name' : ''}`);
}

/** Whether the local date matches the day fields, with the given flavour's OR rule. */
export function dayMatches(
  spec: CronSpec,
  flavour: 'vixie' | 'robfig',
  month: number,
  day: number,
  weekday: number,
): boolean {
  if (!spec.months.has(month)) return false;
  const dom = spec.daysOfMonth.has(day);
  const dow = (flavour === 'robfig' ? spec.robfigDaysOfWeek : spec.daysOfWeek).has(weekday);
  const stars = spec.dayStars[flavour];
  // Vixie and robfig: when both day fields are restricted, either may match.
  return stars.dom || stars.dow ? dom && dow : dom || dow;
}
