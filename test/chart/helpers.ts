/**
 * Shared by the chart and manifest tests: the real `helm` and `kubectl` binaries
 * (from .ci/setup-helm.sh), rendering to objects, and schema validation of every object
 * with kubernetes-models.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as batchV1 from 'kubernetes-models/batch/v1';
import * as rbacV1 from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import * as coreV1 from 'kubernetes-models/v1';
import YAML from 'yaml';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CHART = path.join(ROOT, 'helm/cronsafe');
export const HELM = path.join(ROOT, '.tmp/bin/helm');
export const KUBECTL = path.join(ROOT, '.tmp/bin/kubectl');

/** Runs .ci/setup-helm.sh when a binary is missing, so `npm test` works right after `npm ci`. */
export function ensureTools(): void {
  if (existsSync(HELM) && existsSync(KUBECTL)) return;
  const r = spawnSync('bash', [path.join(ROOT, '.ci/setup-helm.sh')], { encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`.ci/setup-helm.sh failed (${r.status}):\n${r.stderr}`);
}

// Helm keeps caches and repository config under $HOME by default; a private temp dir
// keeps tests from reading or writing the user's.
const helmHome = mkdtempSync(path.join(tmpdir(), 'cronsafe-helm-'));
const helmEnv = {
  ...process.env,
  HELM_CACHE_HOME: path.join(helmHome, 'cache'),
  HELM_CONFIG_HOME: path.join(helmHome, 'config'),
  HELM_DATA_HOME: path.join(helmHome, 'data'),
};

export interface Result {
  status: number | null;
  stdout: string;
  stderr: string;
}

export function helm(args: string[]): Result {
  const r = spawnSync(HELM, args, { encoding: 'utf8', env: helmEnv, timeout: 60_000, maxBuffer: 64 << 20 });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

export function kubectl(args: string[]): Result {
  const r = spawnSync(KUBECTL, args, { encoding: 'utf8', timeout: 60_000, maxBuffer: 64 << 20 });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Values go in as a file: `--set` would turn 1.5 into a string and cannot write null. */
export function valuesFile(values: Record<string, unknown>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-values-'));
  const file = path.join(dir, 'values.yaml');
  writeFileSync(file, YAML.stringify(values));
  return file;
}

/** A Kubernetes object as rendered: loose, since tests read arbitrary paths. */
export type Obj = Record<string, any>;

/**
 * Parses rendered manifests as Helm and the API server do (sigs.k8s.io/yaml is YAML 1.1): a
 * bare 0777, on or y is then a number or a boolean, as it would be in the cluster.
 */
export function parseDocs(text: string): Obj[] {
  return YAML.parseAllDocuments(text, { version: '1.1' })
    .map((d) => {
      if (d.errors.length > 0) throw new Error(`rendered YAML does not parse: ${d.errors[0]?.message}`);
      return d.toJS() as Obj | null;
    })
    .filter((o): o is Obj => o !== null);
}

export const RELEASE = 'qc';
export const NAMESPACE = 'batch';

/** `helm template` with these values; throws with helm's stderr when it fails. */
export function render(values: Record<string, unknown> = {}): Obj[] {
  const r = templateRaw(values);
  if (r.status !== 0) throw new Error(`helm template failed (${r.status}):\n${r.stderr}`);
  return parseDocs(r.stdout);
}

export function templateRaw(values: Record<string, unknown> = {}): Result {
  return helm(['template', RELEASE, CHART, '--namespace', NAMESPACE, '-f', valuesFile(values)]);
}

export function byKind(objs: Obj[], kind: string): Obj[] {
  return objs.filter((o) => o.kind === kind);
}

export function one(objs: Obj[], kind: string, name?: string): Obj {
  const found = objs.filter((o) => o.kind === kind && (name === undefined || o.metadata?.name === name));
  if (found.length !== 1) throw new Error(`expected one ${kind}${name ? ` ${name}` : ''}, found ${found.length}`);
  return found[0] as Obj;
}

/** The runner CronJob (not the suspended status one). */
export function runner(objs: Obj[]): Obj {
  return one(objs, 'CronJob', `${RELEASE}-cronsafe`);
}

export function podSpec(cronJob: Obj): Obj {
  return cronJob.spec.jobTemplate.spec.template.spec as Obj;
}

export function mainContainer(cronJob: Obj): Obj {
  const c = (podSpec(cronJob).containers as Obj[]).find((x) => x.name === 'cronsafe');
  if (!c) throw new Error('no container named cronsafe');
  return c;
}

/** The cronsafe.yaml inside the ConfigMap, parsed. */
export function configOf(objs: Obj[]): Obj {
  const cm = one(objs, 'ConfigMap');
  return YAML.parse(cm.data['cronsafe.yaml'] as string) as Obj;
}

/** The API groups the chart and the manifests may render, with their kubernetes-models classes. */
const MODELS: Record<string, Record<string, unknown>> = {
  v1: coreV1,
  'batch/v1': batchV1,
  'rbac.authorization.k8s.io/v1': rbacV1,
};

/**
 * Validates one object against the Kubernetes OpenAPI schema of its kind with the
 * kubernetes-models class of that apiVersion and kind. Kinds the package does not know
 * (prometheus-operator CRDs) are checked for their required fields instead.
 * Throws naming the object and the failing path.
 */
export function validateObject(obj: Obj): void {
  const where = `${obj.kind}/${obj.metadata?.name}`;
  const apiVersion = String(obj.apiVersion);
  if (apiVersion.startsWith('monitoring.coreos.com/')) return checkPrometheusOperator(obj, where);
  const Model = MODELS[apiVersion]?.[String(obj.kind)] as (new (o: Obj) => { validate(): void }) | undefined;
  if (!Model) throw new Error(`${where}: no kubernetes-models class for ${apiVersion} ${obj.kind}`);
  try {
    new Model(obj).validate();
  } catch (err) {
    throw new Error(`${where}: ${(err as Error).message}`, { cause: err });
  }
}

function checkPrometheusOperator(obj: Obj, where: string): void {
  const need = (cond: boolean, what: string) => {
    if (!cond) throw new Error(`${where}: ${what}`);
  };
  need(obj.apiVersion === 'monitoring.coreos.com/v1', 'apiVersion must be monitoring.coreos.com/v1');
  need(typeof obj.metadata?.name === 'string' && obj.metadata.name !== '', 'metadata.name is required');
  if (obj.kind === 'PodMonitor') {
    need(typeof obj.spec?.selector === 'object', 'spec.selector is required');
    const eps = obj.spec?.podMetricsEndpoints as Obj[] | undefined;
    need(Array.isArray(eps) && eps.length > 0, 'spec.podMetricsEndpoints must be a non-empty list');
    for (const ep of eps ?? []) need(typeof ep.port === 'string', 'podMetricsEndpoints[].port must be a port name');
  } else if (obj.kind === 'PrometheusRule') {
    const groups = obj.spec?.groups as Obj[] | undefined;
    need(Array.isArray(groups) && groups.length > 0, 'spec.groups must be a non-empty list');
    for (const g of groups ?? []) {
      need(typeof g.name === 'string', 'groups[].name is required');
      need(Array.isArray(g.rules) && g.rules.length > 0, `group ${g.name}: rules must be a non-empty list`);
      for (const r of g.rules as Obj[]) {
        need(typeof r.expr === 'string' && r.expr !== '', `group ${g.name}: every rule needs an expr`);
        need(typeof r.alert === 'string' || typeof r.record === 'string', `group ${g.name}: alert or record`);
      }
    }
  } else {
    throw new Error(`${where}: unexpected monitoring.coreos.com kind`);
  }
}

export function validateAll(objs: Obj[]): void {
  for (const o of objs) validateObject(o);
}

/** A fresh temp dir. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  mkdirSync(dir, { recursive: true });
  return dir;
}
