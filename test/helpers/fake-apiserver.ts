/**
 * A fake Kubernetes API server (node:http on 127.0.0.1:0) for the few resources cronsafe
 * uses, enforcing what a real one enforces, so the tests catch what a real cluster would
 * reject: optimistic concurrency (a PUT must carry the stored resourceVersion, else 409;
 * Leases refuse unconditional updates but allow create-on-update; a uid in the body is a
 * precondition), 409 AlreadyExists, 404 NotFound Status bodies,
 * MicroTime fields with exactly 6 fractional digits (Go parses them with the layout
 * "2006-01-02T15:04:05.000000Z07:00"), names (422: a Lease's must be a DNS subdomain;
 * generateName is cut to 58 characters), a bearer token, and optional RBAC denials (403).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** Kubernetes objects as JSON: loosely typed, as the server sees them. */
export type Obj = Record<string, any>;
export type Verb = 'get' | 'list' | 'create' | 'update' | 'delete';

export interface RecordedRequest {
  method: string;
  path: string;
  verb: Verb;
  resource: string;
  name?: string;
  status: number;
  /** The raw request body, as the client serialised it. */
  body: string;
}

/** API group of each resource served, as in the URL (`''` is the core group at /api/v1). */
const GROUPS: Record<string, string> = { leases: 'coordination.k8s.io', events: '', pods: '', jobs: 'batch' };
const KINDS: Record<string, string> = { leases: 'Lease', events: 'Event', pods: 'Pod', jobs: 'Job' };
const MICRO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/;
/** IsDNS1123Subdomain: the rule for Lease names (ValidateLeaseName). */
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** names.SimpleNameGenerator: generateName is cut to 58 characters, then 5 of these appended. */
const NAME_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';
const ROUTE = /^\/(?:api\/v1|apis\/(coordination\.k8s\.io|batch)\/v1)\/namespaces\/([^/]+)\/([^/]+)(?:\/([^/]+))?$/;
export const TOKEN = 'fake-token';

export class FakeApiServer {
  readonly requests: RecordedRequest[] = [];
  /** `resource` -> `namespace/name` -> object. */
  readonly store = new Map<string, Map<string, Obj>>();
  private rv = 100;
  private denied = new Set<string>();
  /** Delay before each request is handled (ms), to interleave concurrent clients. */
  latency: () => number = () => 0;
  /** When set, requests are accepted but never answered (a hung API server). */
  hang = false;
  /** Requests whose client gave up during `latency` are not executed (status 0 in `requests`), as a real API server cancels them. */
  dropAbandoned = true;
  /** When set, every request is answered 503 (an API server restarting behind its load balancer). */
  down = false;
  /** Requests it returns true for are answered 429 with Retry-After: 1, as API Priority and Fairness throttles them under load. */
  throttled: (verb: Verb, resource: string) => boolean = () => false;
  /** Called as each request is about to be handled (after `latency`): tests change the store or the state here, between a client's calls. */
  onRequest: (verb: Verb, resource: string) => void = () => undefined;
  /** When set, connections are cut as they come (the API server process restarting: ECONNRESET, as a refused one is for the client). */
  refuse = false;
  /**
   * Requests it returns true for are read, not executed, and their connection closed without
   * an answer (the API server's process stopping mid-request, as during a control plane
   * upgrade: the client sees the connection reset). Recorded with status 0.
   */
  cut: (verb: Verb, resource: string) => boolean = () => false;
  private server = createServer((req, res) => void this.handle(req, res)).on('connection', (socket) => {
    if (this.refuse) socket.destroy();
  });
  port = 0;
  kubeconfig = '';

  constructor(readonly namespace = 'batch') {}

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-kube-'));
    this.kubeconfig = path.join(dir, 'kubeconfig');
    writeFileSync(this.kubeconfig, kubeconfigYaml(this.url, this.namespace));
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Stop answering (later requests get ECONNREFUSED). */
  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** RBAC: deny `verb` on `resource` (403 Forbidden) until allow(). */
  deny(verb: Verb, resource: string): void {
    this.denied.add(`${verb}/${resource}`);
  }

  allow(verb: Verb, resource: string): void {
    this.denied.delete(`${verb}/${resource}`);
  }

  /** Put an object straight into the store (pods and jobs are seeded this way). */
  seed(resource: string, obj: Obj): Obj {
    const ns = (obj.metadata.namespace ??= this.namespace);
    obj.metadata.uid ??= randomUUID();
    obj.metadata.resourceVersion = String(++this.rv);
    obj.apiVersion ??= GROUPS[resource] ? `${GROUPS[resource]}/v1` : 'v1';
    obj.kind ??= KINDS[resource];
    this.bucket(resource).set(`${ns}/${obj.metadata.name}`, obj);
    return obj;
  }

  get(resource: string, name: string, ns = this.namespace): Obj | undefined {
    return this.bucket(resource).get(`${ns}/${name}`);
  }

  list(resource: string): Obj[] {
    return [...this.bucket(resource).values()];
  }

  private bucket(resource: string): Map<string, Obj> {
    let b = this.store.get(resource);
    if (!b) this.store.set(resource, (b = new Map()));
    return b;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body = '';
    for await (const chunk of req) body += String(chunk);
    const delay = this.latency();
    if (delay > 0) await new Promise((r) => setTimeout(r, delay));
    if (this.hang) return; // never answered; the client's timeout must fire
    const url = new URL(req.url ?? '/', this.url);
    const m = ROUTE.exec(url.pathname);
    const resource = m?.[3] ?? '';
    const name = m?.[4];
    const ns = m?.[2] ?? '';
    const method = req.method ?? 'GET';
    const verb: Verb = method === 'POST' ? 'create' : method === 'PUT' ? 'update' : method === 'DELETE' ? 'delete' : name ? 'get' : 'list';
    if (this.cut(verb, resource)) {
      this.requests.push({ method, path: url.pathname, verb, resource, name, status: 0, body });
      req.socket.destroy();
      return;
    }
    // A client that gave up while its request waited (the latency) is gone: a real API server
    // cancels the request's context, and a request cancelled in its queue (API Priority and
    // Fairness) or before its storage write never takes effect. Recorded (status 0), not executed.
    if (this.dropAbandoned && (req.socket.destroyed || res.destroyed)) {
      this.requests.push({ method, path: url.pathname, verb, resource, name, status: 0, body });
      return;
    }
    this.onRequest(verb, resource);
    const reply = (status: number, obj: Obj) => {
      this.requests.push({ method, path: url.pathname, verb, resource, name, status, body });
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(obj));
    };
    if (this.down) return reply(503, status(503, 'ServiceUnavailable', 'the server is currently unable to handle the request'));
    if (this.throttled(verb, resource)) {
      res.setHeader('retry-after', '1');
      return reply(429, status(429, 'TooManyRequests', 'Too many requests, please try again later.', { retryAfterSeconds: 1 }));
    }
    if (req.headers.authorization !== `Bearer ${TOKEN}`) return reply(401, status(401, 'Unauthorized', 'Unauthorized'));
    if (!m || GROUPS[resource] !== (m[1] ?? '')) {
      return reply(404, status(404, 'NotFound', 'the server could not find the requested resource'));
    }
    const qualified = GROUPS[resource] ? `${resource}.${GROUPS[resource]}` : resource;
    if (this.denied.has(`${verb}/${resource}`)) {
      const what = name ? `${qualified} "${name}"` : qualified;
      return reply(403, status(403, 'Forbidden',
        `${what} is forbidden: User "system:serviceaccount:${ns}:cronsafe" cannot ${verb} resource "${resource}" in API group "${GROUPS[resource]}" in the namespace "${ns}"`));
    }
    const notFound = () => reply(404, status(404, 'NotFound', `${qualified} "${name}" not found`, { name, kind: resource }));
    const stored = name ? this.get(resource, name, ns) : undefined;
    if (verb === 'get') return stored ? reply(200, stored) : notFound();
    if (verb === 'list') return reply(200, { kind: `${KINDS[resource]}List`, apiVersion: 'v1', metadata: {}, items: this.list(resource) });
    if (verb === 'delete') {
      if (!stored) return notFound();
      this.bucket(resource).delete(`${ns}/${name}`);
      return reply(200, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name, kind: resource } });
    }
    let obj: Obj;
    try {
      obj = JSON.parse(body) as Obj;
    } catch {
      return reply(400, status(400, 'BadRequest', 'the body of the request was in an unknown format'));
    }
    const undecodable = decodeProblem(resource, obj);
    if (undecodable) return reply(400, status(400, 'BadRequest', `${KINDS[resource]} in version "v1" cannot be handled as a ${KINDS[resource]}: ${undecodable}`));
    const meta = (obj.metadata ??= {});
    if (meta.namespace !== undefined && meta.namespace !== ns) {
      return reply(400, status(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request'));
    }
    meta.namespace = ns;
    const invalid = validate(resource, obj);
    if (verb === 'create') {
      if (!meta.name && meta.generateName) meta.name = generatedName(String(meta.generateName));
      if (!meta.name) return reply(422, invalidStatus(resource, '', 'metadata.name: Required value: name or generateName is required'));
      const badName = nameProblem(resource, meta.name);
      if (badName || invalid) return reply(422, invalidStatus(resource, meta.name, (badName ?? invalid)!));
      if (this.get(resource, meta.name, ns)) {
        return reply(409, status(409, 'AlreadyExists', `${qualified} "${meta.name}" already exists`, { name: meta.name, kind: resource }));
      }
      meta.uid = randomUUID();
      meta.creationTimestamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      meta.resourceVersion = String(++this.rv);
      this.bucket(resource).set(`${ns}/${meta.name}`, obj);
      return reply(201, obj);
    }
    // update (PUT)
    if (meta.name !== name) {
      return reply(400, status(400, 'BadRequest', `the name of the object (${meta.name}) does not match the name on the URL (${name})`));
    }
    // The body's uid is a precondition (rest.DefaultUpdatedObjectInfo): replacing a deleted
    // or re-created object with a copy of the old one conflicts.
    const uidMismatch = meta.uid !== undefined && meta.uid !== stored?.metadata.uid;
    if (uidMismatch) {
      return reply(409, status(409, 'Conflict',
        `Operation cannot be fulfilled on ${qualified} "${name}": Precondition failed: UID in precondition: ${meta.uid}, UID in object meta: ${stored?.metadata.uid ?? ''}`,
        { name, kind: resource }));
    }
    if (!stored) {
      // Leases allow create-on-update (AllowCreateOnUpdate: true): a PUT without a uid creates.
      const badName = nameProblem(resource, name ?? '');
      if (badName || invalid) return reply(422, invalidStatus(resource, name ?? '', (badName ?? invalid)!));
      meta.uid = randomUUID();
      meta.creationTimestamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      meta.resourceVersion = String(++this.rv);
      this.bucket(resource).set(`${ns}/${name}`, obj);
      return reply(201, obj);
    }
    if (!meta.resourceVersion) {
      // Leases' strategy refuses unconditional updates: no blind writes.
      return reply(422, invalidStatus(resource, name ?? '', 'metadata.resourceVersion: Invalid value: 0x0: must be specified for an update'));
    }
    if (meta.resourceVersion !== stored.metadata.resourceVersion) {
      return reply(409, status(409, 'Conflict',
        `Operation cannot be fulfilled on ${qualified} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
        { name, kind: resource }));
    }
    if (invalid) return reply(422, invalidStatus(resource, name ?? '', invalid));
    meta.uid = stored.metadata.uid;
    meta.creationTimestamp = stored.metadata.creationTimestamp;
    meta.resourceVersion = String(++this.rv);
    this.bucket(resource).set(`${ns}/${name}`, obj);
    return reply(200, obj);
  }
}

/** What the JSON decoder rejects (400): MicroTime fields are parsed with a fixed 6-digit layout. */
function decodeProblem(resource: string, obj: Obj): string | undefined {
  const micro: Array<[string, unknown]> =
    resource === 'leases' ? [['spec.acquireTime', obj.spec?.acquireTime], ['spec.renewTime', obj.spec?.renewTime]]
    : resource === 'events' ? [['eventTime', obj.eventTime]]
    : [];
  for (const [field, v] of micro) {
    if (v === undefined || v === null) continue;
    if (typeof v !== 'string' || !MICRO_TIME.test(v)) {
      return `${field}: parsing time ${JSON.stringify(v)} as "2006-01-02T15:04:05.000000Z07:00": cannot parse`;
    }
  }
  // int32 fields: a fraction or a number past 2^31 - 1 is refused by the decoder (400).
  for (const field of ['leaseDurationSeconds', 'leaseTransitions']) {
    const n: unknown = obj.spec?.[field];
    if (resource !== 'leases' || n === undefined || n === null) continue;
    if (typeof n !== 'number' || !Number.isInteger(n) || n > 2 ** 31 - 1 || n < -(2 ** 31)) {
      return `json: cannot unmarshal number ${String(n)} into Go struct field LeaseSpec.spec.${field} of type int32`;
    }
  }
  return undefined;
}

function generatedName(base: string): string {
  const random = [...randomBytes(5)].map((b) => NAME_ALPHABET[b % NAME_ALPHABET.length]).join('');
  return `${base.slice(0, 58)}${random}`;
}

/**
 * metadata.name (422): every object's must be a valid path segment (ValidateObjectMetaAccessor);
 * a Lease's a DNS-1123 subdomain, at most 253 characters.
 */
function nameProblem(resource: string, name: string): string | undefined {
  if (name === '.' || name === '..' || /[/%]/.test(name)) return `metadata.name: Invalid value: "${name}": may not be '.' or '..' and may not contain '/' or '%'`;
  if (resource === 'leases' && (name.length > 253 || !DNS_SUBDOMAIN.test(name))) {
    return `metadata.name: Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`;
  }
  return undefined;
}

/** Field validation (422), as the registry strategies do it. */
function validate(resource: string, obj: Obj): string | undefined {
  if (resource === 'leases') {
    const d = obj.spec?.leaseDurationSeconds;
    if (d !== undefined && d !== null && d <= 0) return `spec.leaseDurationSeconds: Invalid value: ${d}: must be greater than 0`;
    const t = obj.spec?.leaseTransitions;
    if (t !== undefined && t !== null && t < 0) return `spec.leaseTransitions: Invalid value: ${t}: must be greater than or equal to 0`;
  }
  if (resource === 'events') {
    const io = obj.involvedObject ?? {};
    if (io.namespace !== obj.metadata.namespace) return `involvedObject.namespace: Invalid value: "${io.namespace}": does not match event.namespace`;
    if (!['Normal', 'Warning'].includes(obj.type)) return `type: Unsupported value: "${obj.type}": supported values: "Normal", "Warning"`;
    if (!obj.reason) return 'reason: Required value';
    // A core/v1 Event with an eventTime is held to the events.k8s.io limits (legacyValidateEvent).
    if (obj.eventTime) {
      if (!obj.reportingComponent) return 'reportingComponent: Required value';
      if (!obj.reportingInstance) return 'reportingInstance: Required value';
      if (String(obj.reportingInstance).length > 128) return 'reportingInstance: Invalid value: "": can have at most 128 characters';
      if (!obj.action) return 'action: Required value';
      if (String(obj.action).length > 128) return 'action: Invalid value: "": can have at most 128 characters';
      if (String(obj.reason).length > 128) return 'reason: Invalid value: "": can have at most 128 characters';
      if (String(obj.message ?? '').length > 1024) return 'message: Invalid value: "": can have at most 1024 characters';
    }
  }
  return undefined;
}

function status(code: number, reason: string, message: string, details?: Obj): Obj {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details ? { details } : {}), code };
}

function invalidStatus(resource: string, name: string, cause: string): Obj {
  const qualified = GROUPS[resource] ? `${KINDS[resource]}.${GROUPS[resource]}` : KINDS[resource];
  return status(422, 'Invalid', `${qualified} "${name}" is invalid: ${cause}`, { name, kind: KINDS[resource] });
}

/** Plain HTTP on loopback: client-node allows that only with insecure-skip-tls-verify. */
export function kubeconfigYaml(server: string, namespace: string): string {
  return `apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster: {server: "${server}", insecure-skip-tls-verify: true}
users:
- name: fake
  user: {token: ${TOKEN}}
contexts:
- name: fake
  context: {cluster: fake, user: fake, namespace: ${namespace}}
current-context: fake
`;
}

export async function startFakeApiServer(namespace?: string): Promise<FakeApiServer> {
  return new FakeApiServer(namespace).start();
}
