/**
 * Pure Lease logic, no API calls: given what a Lease says and the time now, is it ours to
 * take? The clock is a parameter, so the tests can walk a Lease through its life.
 */

/** The fields of a coordination.k8s.io/v1 LeaseSpec that decide who holds it. */
export interface LeaseRecord {
  holderIdentity?: string | null;
  /** MicroTime: client-node hands it back as the server's string, or as a Date when we built it. */
  renewTime?: Date | string | null;
  acquireTime?: Date | string | null;
  leaseDurationSeconds?: number | null;
  leaseTransitions?: number | null;
}

export type LeaseDecision =
  /** Free, released or expired: write ourselves in (with the read resourceVersion). */
  | { action: 'take'; transitions: number; previousHolder?: string }
  /** Someone else holds it until `expiresAt`. */
  | { action: 'held'; holder: string; expiresAt: Date };

/** Epoch ms of a MicroTime/Time value; undefined when absent or unparseable. */
export function timeOf(v: Date | string | null | undefined): number | undefined {
  if (v === null || v === undefined) return undefined;
  const ms = v instanceof Date ? v.getTime() : Date.parse(v);
  return Number.isNaN(ms) ? undefined : ms;
}

/**
 * When a held Lease stops holding: last renewal (else acquisition) plus its duration. A
 * Lease without a duration gets ours, so a malformed record cannot block us forever nor
 * be stolen at once. Undefined when it has no time at all: nobody can be renewing it.
 */
export function leaseExpiry(spec: LeaseRecord, fallbackDurationSeconds: number): number | undefined {
  const since = timeOf(spec.renewTime) ?? timeOf(spec.acquireTime);
  if (since === undefined) return undefined;
  const duration = spec.leaseDurationSeconds && spec.leaseDurationSeconds > 0 ? spec.leaseDurationSeconds : fallbackDurationSeconds;
  return since + duration * 1000;
}

/**
 * Whether `me` may take the Lease at `nowMs`. Held means: a holder is named and its
 * renewTime + leaseDurationSeconds is still in the future. The holder's clock wrote
 * renewTime and ours judges it, so the nodes' clocks must agree to well within the
 * duration (NTP). (client-go's leader election watches the record for a duration by its own
 * clock instead, which tolerates skew but makes every takeover wait; docs/kubernetes-api.md.)
 */
export function decideAcquire(spec: LeaseRecord | undefined, me: string, nowMs: number, fallbackDurationSeconds: number): LeaseDecision {
  const transitions = (spec?.leaseTransitions ?? 0) + 1;
  const holder = spec?.holderIdentity ?? '';
  if (!spec || holder === '' || holder === me) return { action: 'take', transitions };
  const expiry = leaseExpiry(spec, fallbackDurationSeconds);
  if (expiry !== undefined && expiry > nowMs) return { action: 'held', holder, expiresAt: new Date(expiry) };
  return { action: 'take', transitions, previousHolder: holder };
}

/**
 * A MicroTime as the API server parses it: always 6 fractional digits
 * (`2006-01-02T15:04:05.000000Z07:00`). Date#toISOString has 3, which a real API server
 * rejects with 400; client-node's V1MicroTime pads the same way, this is the string form
 * for checks and tests.
 */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/Z$/, '000Z');
}

export const MICRO_TIME_RE = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/;
