/**
 * The one door to the Kubernetes API. @kubernetes/client-node (and its HTTP stack) is
 * imported here only, dynamically, the first time a Kubernetes feature is used: a run
 * without lock.kubernetesLease, events or scheduledTimestamp never loads it. Every other
 * module imports its types only (`import type`), which the compiler erases.
 */
import { closeSync, existsSync, fstatSync, openSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import type * as K8s from '@kubernetes/client-node';
import type { Config } from '../config/types.js';
import { coerceError } from '../errors.js';

export type ClientNode = typeof K8s;

let loading: Promise<ClientNode> | undefined;

/** The client library, loaded once per process on first use. */
export function loadClientNode(): Promise<ClientNode> {
  loading ??= import('@kubernetes/client-node');
  return loading;
}

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** Who this process is, as the pod's downward API env (helm/cronsafe/templates/_pod.tpl) tells it. */
export interface PodIdentity {
  podName?: string;
  /** The pod's namespace: CRONSAFE_POD_NAMESPACE, POD_NAMESPACE, else the service account's. */
  namespace?: string;
  /** From the pod's `batch.kubernetes.io/job-name` label; else read from the pod's ownerReferences. */
  jobName?: string;
  jobUid?: string;
}

/** `fsRoot` prefixes the service account path (tests). */
export function podIdentity(env: NodeJS.ProcessEnv = process.env, fsRoot = ''): PodIdentity {
  const pick = (...names: string[]) => names.map((n) => env[n]?.trim()).find((v) => v);
  let saNamespace: string | undefined;
  try {
    saNamespace = readFileSync(`${fsRoot}${SERVICE_ACCOUNT_DIR}/namespace`, 'utf8').trim() || undefined;
  } catch {
    /* not in a pod, or the token is not mounted */
  }
  const id: PodIdentity = {};
  const podName = pick('CRONSAFE_POD_NAME', 'POD_NAME');
  const namespace = pick('CRONSAFE_POD_NAMESPACE', 'POD_NAMESPACE') ?? saNamespace;
  const jobName = pick('CRONSAFE_JOB_NAME', 'JOB_NAME');
  const jobUid = pick('CRONSAFE_JOB_UID');
  if (podName) id.podName = podName;
  if (namespace) id.namespace = namespace;
  if (jobName) id.jobName = jobName;
  if (jobUid) id.jobUid = jobUid;
  return id;
}

/** A connection to the API: typed clients, the namespace to work in, per-request options. */
export interface Kube {
  k8s: ClientNode;
  coordination: K8s.CoordinationV1Api;
  core: K8s.CoreV1Api;
  batch: K8s.BatchV1Api;
  /** The pod's namespace, else the kubeconfig context's, else `default`. */
  namespace: string;
  /** `namespace` is the last resort, `default`: nothing named one. */
  namespaceGuessed: boolean;
  identity: PodIdentity;
  /** Where the credentials came from, for log lines. */
  source: string;
  /** Pass to every call: bounds it by the connection's request timeout, or by `timeoutMs`; `stop` aborts it sooner. */
  options(timeoutMs?: number, stop?: AbortSignal): K8s.ConfigurationOptions;
}

export interface ConnectOptions {
  env?: NodeJS.ProcessEnv;
  /** Each request is aborted after this long: a hung API server must not hang the run. */
  timeoutMs?: number;
  /** Prefix of the service account path (tests). */
  fsRoot?: string;
}

export type Connected = { ok: true; kube: Kube } | { ok: false; reason: string };

/**
 * Credentials, in kubectl's order but without its last resort: KUBECONFIG, then the pod's
 * service account, then ~/.kube/config. client-node's loadFromDefault() would fall back to
 * http://localhost:8080, which only turns "not in a cluster" into a confusing
 * connection error; here it is a clear reason instead.
 */
export async function connectKube(opts: ConnectOptions = {}): Promise<Connected> {
  const env = opts.env ?? process.env;
  const fsRoot = opts.fsRoot ?? '';
  const home = path.join(env.HOME || homedir(), '.kube', 'config');
  // Both, as client-go's InClusterConfig wants them (the kubelet sets both in every pod): with
  // the host alone the client aimed at `https://<host>:undefined`, and every start spent the
  // acquire's 10 s on "cannot reach the API server (ERR_INVALID_URL)".
  const serviceHost = env.KUBERNETES_SERVICE_HOST?.trim();
  const servicePort = env.KUBERNETES_SERVICE_PORT?.trim();
  const token = existsSync(`${fsRoot}${SERVICE_ACCOUNT_DIR}/token`);
  const inCluster = !!serviceHost && !!servicePort && token;
  const listed = env.KUBECONFIG ? env.KUBECONFIG.split(path.delimiter).filter((f) => f) : undefined;
  // Set, KUBECONFIG is the only kubeconfig kubectl reads; but when none of its files is there
  // (an image's `ENV KUBECONFIG` for a file the pod does not mount), client-go takes that for
  // an empty config and uses the pod's service account. It turned every feature off here.
  const fromKubeconfig = listed !== undefined && (!inCluster || listed.some(hasContent));
  const source = fromKubeconfig
    ? `KUBECONFIG=${env.KUBECONFIG}`
    : inCluster
      ? `in-cluster service account${listed ? ` (KUBECONFIG=${env.KUBECONFIG} names no kubeconfig file here)` : ''}`
      : existsSync(home) ? home : undefined;
  if (source === undefined) {
    const half = token && (serviceHost || servicePort)
      ? `the service account token is mounted but ${serviceHost ? 'KUBERNETES_SERVICE_PORT' : 'KUBERNETES_SERVICE_HOST'} is not set (a pod has both), so the API server's address is unknown`
      : 'not in a pod with a service account token';
    return { ok: false, reason: `no Kubernetes credentials: ${half}, and no KUBECONFIG or ~/.kube/config` };
  }
  let k8s: ClientNode;
  try {
    k8s = await loadClientNode();
  } catch (err) {
    return { ok: false, reason: `cannot load @kubernetes/client-node: ${coerceError(err).message}` };
  }
  const kc = new k8s.KubeConfig();
  try {
    const files = fromKubeconfig ? listed : inCluster ? undefined : [home];
    if (files === undefined) kc.loadFromCluster(fsRoot);
    else loadKubeconfigs(k8s, kc, files);
    if (!kc.getCurrentCluster()) throw new Error('no current cluster in the kubeconfig');
  } catch (err) {
    // The first line only: a YAML error goes on with the lines around the fault (js-yaml's
    // snippet), which in a kubeconfig are its token, password or client key, and this reason
    // goes to the log.
    return { ok: false, reason: `cannot load Kubernetes credentials from ${source}: ${yamlFault(err) ?? firstLine(coerceError(err).message)}` };
  }
  const identity = podIdentity(env, fsRoot);
  const contextNamespace = kc.getContextObject(kc.getCurrentContext())?.namespace;
  const timeoutMs = opts.timeoutMs ?? 5000;
  const kube: Kube = {
    k8s,
    coordination: kc.makeApiClient(k8s.CoordinationV1Api),
    core: kc.makeApiClient(k8s.CoreV1Api),
    batch: kc.makeApiClient(k8s.BatchV1Api),
    namespace: identity.namespace ?? contextNamespace ?? 'default',
    namespaceGuessed: !identity.namespace && !contextNamespace,
    identity,
    source,
    options: (ms = timeoutMs, stop) => timeoutOptions(k8s, kc, ms, stop),
  };
  return { ok: true, kube };
}

/**
 * A kubeconfig file that is there and not empty: an empty one (a `touch`ed ~/.kube/config) is
 * an empty kubeconfig to kubectl; the client refuses it (expected a document). One that cannot
 * be read counts as there: reading it says why.
 */
function hasContent(file: string): boolean {
  try {
    return readKubeconfig(file).trim() !== '';
  } catch (err) {
    return (err as { code?: unknown }).code !== 'ENOENT' && (err as { code?: unknown }).code !== 'ENOTDIR';
  }
}

/** What each kubeconfig that is not a regular file held when first read (see readKubeconfig). */
const readOnce = new Map<string, string>();

/**
 * A kubeconfig's text. One that is not a regular file (`KUBECONFIG=<(sops -d ...)`, a pipe)
 * can be read only once: what it held is kept for the process. It was read again (to load
 * it, for its tokenFile, for each feature) and found empty: the features were off where
 * kubectl, which reads it once, worked. A regular file is read each time (it may be rewritten).
 */
function readKubeconfig(file: string): string {
  const kept = readOnce.get(file);
  if (kept !== undefined) return kept;
  const fd = openSync(file, 'r');
  try {
    const text = readFileSync(fd, 'utf8');
    if (!fstatSync(fd).isFile()) readOnce.set(file, text);
    return text;
  } finally {
    closeSync(fd);
  }
}

/**
 * KUBECONFIG as kubectl reads it: a list of files (`:`-separated), those that do not exist
 * (or are empty) skipped, merged with the first file to name a cluster, user or context winning, and the
 * first `current-context` set. Only its first file was read: `KUBECONFIG=~/.kube/config:~/.kube/prod`
 * with the context in the second, or a first file not there, left the feature off.
 */
function loadKubeconfigs(k8s: ClientNode, kc: K8s.KubeConfig, files: string[]): void {
  const present = files.filter(hasContent);
  if (present.length === 0) throw new Error(`no kubeconfig: ${files.join(', ')} missing or empty`);
  /** The file each user came from: its tokenFile is relative to that file's directory. */
  const userFile = new Map<string, string>();
  present.forEach((file, i) => {
    const one = i === 0 ? kc : new k8s.KubeConfig();
    one.loadFromString(readKubeconfig(file));
    one.makePathsAbsolute(path.dirname(file)); // as loadFromFile does
    for (const u of one.users) if (!userFile.has(u.name)) userFile.set(u.name, file);
    if (one === kc) return;
    const merged = <T extends { name: string }>(into: T[], from: T[]): T[] => [...into, ...from.filter((x) => !into.some((y) => y.name === x.name))];
    kc.clusters = merged(kc.clusters, one.clusters);
    kc.users = merged(kc.users, one.users);
    kc.contexts = merged(kc.contexts, one.contexts);
    if (!kc.currentContext && one.currentContext) kc.currentContext = one.currentContext;
  });
  const userName = kc.getContextObject(kc.getCurrentContext())?.user;
  const file = userName === undefined ? undefined : userFile.get(userName);
  if (file) useTokenFile(kc, file);
}

/**
 * A kubeconfig user's `tokenFile` (client-go's key, as in-cluster kubeconfigs and token
 * projections for sidecars write it), which client-node does not read: kubectl worked with
 * the file, and cronsafe sent no token at all (401, the feature off). Given to the client
 * as its in-cluster token file is, read again at most every minute (a projected token
 * rotates), as client-go does. Only for a user without a credential plugin or auth provider.
 */
function useTokenFile(kc: K8s.KubeConfig, file: string): void {
  const userName = kc.getContextObject(kc.getCurrentContext())?.user;
  const user = kc.getCurrentUser();
  if (!userName || !user || user.exec || user.authProvider) return;
  let doc: unknown;
  try {
    doc = YAML.parse(readKubeconfig(file));
  } catch {
    return; // the client read it: a second read failing is not worth more than the client's own
  }
  const users = (doc as { users?: unknown } | null)?.users;
  const entry = Array.isArray(users) ? (users as Array<{ name?: unknown; user?: { tokenFile?: unknown } } | null>).find((u) => u?.name === userName) : undefined;
  const tokenFile = entry?.user?.tokenFile;
  if (typeof tokenFile !== 'string' || !tokenFile) return;
  // Relative to the kubeconfig's directory, as client-go resolves it; its contents win over `token`.
  const withFile: K8s.User = { ...user, token: undefined, authProvider: { name: 'tokenFile', config: { tokenFile: path.resolve(path.dirname(file), tokenFile) } } };
  kc.users = kc.users.map((u) => (u === user ? withFile : u));
}

/**
 * At most 5 s and no more than a quarter of the drain margin: how long the end of a stopped
 * run waits for the Events still in flight, and the least its Lease release gets. Both come
 * after a drain, and must fit before the kubelet's SIGKILL.
 */
export function requestTimeoutMs(config: Pick<Config, 'drain'>): number {
  return Math.max(500, Math.min(API_TIMEOUT_MS, (config.drain.marginSeconds * 1000) / 4));
}

/**
 * Calls before the pass and during it (the Job reads, the Lease's acquire and renewals, the
 * Events) are not squeezed into the drain margin: an API server under load can take over a
 * second to answer, and cut at 1.25 s (a quarter of the default margin) the Lease was given
 * up for the local lock, or lost while this run held it, and no Event arrived.
 */
export const API_TIMEOUT_MS = 5000;

/** Where a combined signal keeps the timeout signal it was made from (timeoutOptions). */
const HOLDS = Symbol('cronsafe.timeoutSignal');

/** The credentials of a call (a kubeconfig's exec plugin) did not come within its timeout. */
const CREDENTIALS_TIMEOUT = 'CredentialsTimeoutError';

/**
 * A middleware that gives each request its own timeout signal (the client sets none), and
 * the same bound (and `stop`) on getting its credentials, which comes before the request: a
 * kubeconfig's exec plugin (aws, gke-gcloud-auth-plugin) that hung, waiting for a login or a
 * network, hung the run, and a SIGTERM did not end it (only the drain's last resort did).
 */
function timeoutOptions(k8s: ClientNode, kc: K8s.KubeConfig, ms: number, stop?: AbortSignal): K8s.ConfigurationOptions {
  // Whole ms: AbortSignal.timeout throws on a fraction (a quarter of drain.marginSeconds: 2.25).
  const whole = Math.max(1, Math.ceil(ms));
  const middleware: K8s.ObservableMiddleware = {
    pre: (ctx) => {
      const timeout = AbortSignal.timeout(whole);
      // Node 20's AbortSignal.any holds its sources weakly: with nothing else holding the
      // timeout's signal, a garbage collection during the call took it, and the call was
      // never cut (an acquire on a hung API server waited until the SIGTERM). The combined
      // signal, which the request holds, holds it here.
      const signal = stop ? Object.assign(AbortSignal.any([timeout, stop]), { [HOLDS]: timeout }) : timeout;
      ctx.setSignal(signal);
      return new k8s.Observable(Promise.resolve(ctx));
    },
    post: (res) => new k8s.Observable(Promise.resolve(res)),
  };
  const credentials: K8s.SecurityAuthentication = {
    getName: () => kc.getName(),
    applySecurityAuthentication: async (ctx) => {
      const given = Promise.resolve(kc.applySecurityAuthentication(ctx));
      let timer: NodeJS.Timeout | undefined;
      let onStop = () => {};
      const cut = new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => reject(new DOMException(`the Kubernetes credentials did not come within ${whole / 1000} s (a kubeconfig exec plugin that hangs?)`, CREDENTIALS_TIMEOUT)), whole);
        onStop = () => reject(new DOMException('stopped', 'AbortError'));
        if (stop?.aborted) onStop();
        else stop?.addEventListener('abort', onStop, { once: true });
      });
      try {
        await Promise.race([given, cut]);
      } finally {
        clearTimeout(timer);
        stop?.removeEventListener('abort', onStop);
        given.catch(() => undefined);
      }
    },
  };
  // 'append': keep the client's own middleware (its User-Agent header).
  return { middleware: [middleware], middlewareMergeStrategy: 'append', authMethods: { default: credentials } };
}

/** What went wrong with a call, in the terms the callers decide on. */
export interface ApiFailure {
  kind: 'forbidden' | 'unauthorized' | 'not-found' | 'conflict' | 'invalid' | 'unreachable' | 'timeout' | 'server';
  status?: number;
  /** One line: the API server's Status message when there is one. */
  message: string;
}

/** OpenSSL's verdicts on a server certificate (Node's error codes): the TLS handshake reached the API server. */
const TLS_UNTRUSTED = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** fs calls behind reading a credentials file: an error from one is not the network's. */
const FILE_SYSCALLS = new Set(['open', 'read', 'stat', 'lstat', 'fstat']);

const KIND_BY_STATUS: Record<number, ApiFailure['kind']> = { 401: 'unauthorized', 403: 'forbidden', 404: 'not-found', 409: 'conflict', 400: 'invalid', 422: 'invalid' };

/** Classify anything a client call threw: an ApiException (HTTP status), a network error, a timeout. */
export function apiFailure(err: unknown): ApiFailure {
  const e = err as { code?: unknown; body?: unknown; name?: string; message?: string; cause?: { code?: string; message?: string } };
  // Before `code`: a DOMException has a numeric legacy code too (23 for a timeout).
  if (e?.name === CREDENTIALS_TIMEOUT) return { kind: 'unauthorized', message: e.message ?? CREDENTIALS_TIMEOUT };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') return { kind: 'timeout', message: 'the API server did not answer in time' };
  if (typeof e?.code === 'number' && e.code >= 100 && e.code <= 599) {
    const status = e.code;
    return { kind: KIND_BY_STATUS[status] ?? 'server', status, message: `HTTP ${status}: ${statusMessage(e.body) ?? exceptionMessage(status, e.message)}` };
  }
  // A credentials file the client reads for each request (the service account's token or
  // ca.crt, a kubeconfig's tokenFile or certificate) that this user cannot read: Node's own
  // fs error, thrown before any connection (a network error comes as `fetch failed` with a
  // cause). It was "cannot reach the API server (EACCES)", tried again for 10 s at every start.
  // So is a kubeconfig's credential plugin (`exec`: aws, gke-gcloud-auth-plugin) that
  // cannot be started (spawn ENOENT).
  const syscall = (err as { syscall?: unknown } | null)?.syscall;
  if (typeof e?.code === 'string' && e.cause === undefined && typeof syscall === 'string') {
    if (FILE_SYSCALLS.has(syscall)) {
      return { kind: 'unauthorized', message: `cannot read the Kubernetes credentials: ${firstLine(e.message)} (the token and CA files must be readable by this user, uid ${process.getuid?.() ?? '?'})` };
    }
    if (syscall.startsWith('spawn')) return { kind: 'unauthorized', message: `cannot run the kubeconfig's credential plugin: ${firstLine(e.message)}` };
  }
  const cause = e?.cause?.code ?? (typeof e?.code === 'string' ? e.code : undefined);
  // The server answered, with a certificate the cluster's CA does not verify: a CA that is
  // not the cluster's (rotated, another cluster's, a TLS-inspecting proxy). It will not pass
  // in a moment: "cannot reach the API server" sent people to the network, and the Lease's
  // acquire tried again for 10 s at every start.
  if (cause && TLS_UNTRUSTED.has(cause)) {
    return { kind: 'unauthorized', message: `the API server's certificate is not trusted (${cause}): the cluster's certificate-authority in the kubeconfig, or the service account's ca.crt, did not sign it` };
  }
  if (cause) return { kind: 'unreachable', message: `cannot reach the API server (${cause})` };
  return { kind: 'server', message: firstLine(e?.message ?? coerceError(err).message) };
}

/**
 * The client drops the body of an answer its API description lists (every call's 401), and
 * its own message starts `HTTP-Code: 401`, then `Message: Unauthorized`: that first line
 * was the whole reason (`HTTP 401: HTTP-Code: 401`), saying nothing of the credentials.
 */
function exceptionMessage(status: number, message: string | undefined): string {
  const said = /^Message: (.+)$/m.exec(message ?? '')?.[1]?.trim();
  const what = said && said !== 'Unknown API Status Code!' ? said : firstLine(message);
  return status === 401 ? `${what}: the API server refused the credentials (a token expired, revoked or for another cluster?)` : what;
}

function statusMessage(body: unknown): string | undefined {
  let b = body;
  if (typeof body === 'string') {
    try {
      b = JSON.parse(body);
    } catch {
      return body.trim() ? firstLine(body) : undefined;
    }
  }
  const m = (b as { message?: unknown } | undefined)?.message;
  return typeof m === 'string' ? m : undefined;
}

const firstLine = (s: string | undefined) => (s ?? '').split('\n')[0] ?? '';

/**
 * A js-yaml error as `<reason> (line:column)`, its reason left out when it quotes the file
 * (an alias's name, a tag: `unidentified alias "..."`, `unknown scalar tag !<...>`), which in a
 * kubeconfig is a value written unquoted, a password or token starting with `*` or `!`. Only
 * plain words are kept (`bad indentation of a mapping entry`). Undefined for another error.
 */
function yamlFault(err: unknown): string | undefined {
  const e = err as { name?: unknown; reason?: unknown; mark?: { line?: unknown; column?: unknown } } | null;
  if (e?.name !== 'YAMLException' || typeof e.mark?.line !== 'number' || typeof e.mark.column !== 'number') return undefined;
  const reason = typeof e.reason === 'string' && /^[a-z][a-z ,;-]*$/i.test(e.reason) ? e.reason : 'not valid YAML';
  return `${reason} (${e.mark.line + 1}:${e.mark.column + 1})`;
}
