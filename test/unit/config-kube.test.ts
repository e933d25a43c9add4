/** Config keys of the Kubernetes API features: lock.kubernetesLease, events, scheduledTimestamp. */
import { describe, expect, it } from 'vitest';
import { configSummary, loadConfig } from '../../src/config/load.js';
import { expectProblem, useConfigDir } from '../helpers/config-files.js';

const dir = useConfigDir();
const load = (extra: string) => loadConfig(dir.minimal(extra), { env: {} });

describe('lock.kubernetesLease', () => {
  it('is off when absent, and so are Events and the Job annotation read', () => {
    const c = load('');
    expect(c.lock.kubernetesLease).toBeUndefined();
    expect(c.events).toBeUndefined();
    expect(c.scheduledTimestamp).toBeUndefined();
  });

  it('the mapping turns it on; name, duration and renewal default to name and lease.*', () => {
    expect(load('lock: {kubernetesLease: {}}\n').lock.kubernetesLease).toEqual({ name: 'job', durationSeconds: 90, renewSeconds: 30 });
    expect(load('lease: {seconds: 40.5, renewSeconds: 10}\nlock: {kubernetesLease: {}}\n').lock.kubernetesLease)
      .toEqual({ name: 'job', durationSeconds: 41, renewSeconds: 10 });
  });

  it('accepts what the Helm chart renders (just a name)', () => {
    const c = load('lock:\n  kubernetesLease:\n    name: "qc-cronsafe"\n');
    expect(c.lock.kubernetesLease).toEqual({ name: 'qc-cronsafe', durationSeconds: 90, renewSeconds: 30 });
  });

  it('every key set', () => {
    const c = load('lock: {path: x.lock, kubernetesLease: {enabled: true, name: qc.lock, namespace: batch, durationSeconds: 60, renewSeconds: 20}}\n');
    expect(c.lock).toEqual({ path: `${dir.root}/x.lock`, allowNetworkFilesystem: false, kubernetesLease: { name: 'qc.lock', namespace: 'batch', durationSeconds: 60, renewSeconds: 20 } });
    expect(configSummary(c).lock).toEqual(c.lock);
  });

  it('enabled: false keeps the settings but turns it off', () => {
    expect(load('lock: {kubernetesLease: {enabled: false, name: qc}}\n').lock.kubernetesLease).toBeUndefined();
  });

  it.each([
    ['lock: {kubernetesLease: {durationSeconds: 20, renewSeconds: 20}}', 'lock.kubernetesLease.renewSeconds', 'must be less than lock.kubernetesLease.durationSeconds (20), got 20'],
    ['lock: {kubernetesLease: {renewSeconds: 90}}', 'lock.kubernetesLease.renewSeconds', 'must be less than the Lease duration (90, from lease.seconds), got 90'],
    ['lock: {kubernetesLease: {durationSeconds: 30}}', 'lock.kubernetesLease.durationSeconds', 'must be greater than the renewal interval (30, from lease.renewSeconds), got 30'],
    ['lock: {kubernetesLease: {durationSeconds: 1.5}}', 'lock.kubernetesLease.durationSeconds', 'expected an integer from 1 to 2147483, got 1.5'],
    ['lock: {kubernetesLease: {renewSeconds: 0}}', 'lock.kubernetesLease.renewSeconds', 'expected a number of seconds > 0 and <= 2147483, got 0'],
    ['lock: {kubernetesLease: {name: Bad_Name}}', 'lock.kubernetesLease.name',
      'expected a Kubernetes object name: lowercase letters, digits, "-" and ".", starting and ending with a letter or digit, as does each part between dots, got "Bad_Name"'],
    // A DNS subdomain: the API server refuses these Lease names (422), and the run went on without its Lease, every time.
    ...['a..b', 'a.-b', 'a-.b', 'qc.'].map((name) => [`lock: {kubernetesLease: {name: "${name}"}}`, 'lock.kubernetesLease.name',
      `expected a Kubernetes object name: lowercase letters, digits, "-" and ".", starting and ending with a letter or digit, as does each part between dots, got "${name}"`]),
    ['lock: {kubernetesLease: {namespace: my.ns}}', 'lock.kubernetesLease.namespace',
      'expected a Kubernetes namespace: lowercase letters, digits and "-", starting and ending with a letter or digit, got "my.ns"'],
    ['lock: {kubernetesLease: {enabled: "yes"}}', 'lock.kubernetesLease.enabled', 'expected true or false, got "yes"'],
    ['lock: {kubernetesLease: {durationSecond: 60}}', 'lock.kubernetesLease.durationSecond', 'unknown key (did you mean "durationSeconds"?)'],
    ['lock: {kubernetesLease: true}', 'lock.kubernetesLease', 'expected a mapping, got true'],
  ])('%s -> %s', (yaml, key, text) => {
    expectProblem(dir.minimal(`${yaml}\n`), key, text);
  });
});

describe('events and scheduledTimestamp', () => {
  it('are off unless enabled, and show in the run-start summary', () => {
    const c = load('events: {enabled: true}\nscheduledTimestamp: {enabled: true}\n');
    expect(c.events).toEqual({ enabled: true });
    expect(c.scheduledTimestamp).toEqual({ enabled: true });
    expect(configSummary(c)).toMatchObject({ events: { enabled: true }, scheduledTimestamp: { enabled: true } });
    expect(load('events: {}\n').events).toEqual({ enabled: false });
  });

  it.each([
    ['events: {enabled: 1}', 'events.enabled', 'expected true or false, got 1'],
    ['events: {enable: true}', 'events.enable', 'unknown key (did you mean "enabled"?)'],
    ['scheduledTimestamp: {enabled: "true"}', 'scheduledTimestamp.enabled', 'expected true or false, got "true" (in quotes, so a string: remove the quotes)'],
    ['scheduledTimestmp: {enabled: true}', 'scheduledTimestmp', 'unknown key (did you mean "scheduledTimestamp"?)'],
  ])('%s -> %s', (yaml, key, text) => {
    expectProblem(dir.minimal(`${yaml}\n`), key, text);
  });
});
