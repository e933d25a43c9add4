/**
 * The ledger's quota check (src/block-probe.ts, quotaUsedUp) makes a one-block file,
 * `.cronsafe-quota-probe-<pid>-<time>-<n>`, in the SQLite ledger's directory whenever SQLite
 * reports an I/O error, and removes it at once; a run killed in that instant leaves it
 * there. With the ledger's directory inside source.directory and an include glob that
 * matches dot files, the scan listed that file and recorded it as an item (a scan that met
 * it in its moment got an item whose file was gone for its attempt; a leftover was run,
 * its output written, and counted done). cronsafe's own short-lived files are skipped, as
 * its ledger and lock are; a file of that name anywhere else is the user's, an item.
 */
import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import YAML from 'yaml';
import { describe, expect, it } from 'vitest';
import { FIXTURES, finished, runCli } from '../helpers/cli.js';

const COPY = [process.execPath, path.join(FIXTURES, 'process/copy-exec.mjs'), '{path}', '{output}'];
/** As a run killed between the probe's open and its unlink leaves it. */
const PROBE = '.cronsafe-quota-probe-4242-mfz0k1a-1';

/** The ids the ledger at `db` holds. */
function ledgerIds(db: string): string[] {
  const d = new Database(db, { readonly: true });
  try {
    return (d.prepare('SELECT id FROM items ORDER BY id').all() as { id: string }[]).map((r) => r.id);
  } finally {
    d.close();
  }
}

describe("the ledger's quota probe, in a source that holds the ledger's directory", () => {
  // The ledger in a subdirectory of the source, and at its top.
  it.each([['state'], ['']])("is never an item (ledger directory %j in the source, include matching dot files)", async (stateDir) => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cronsafe-probe-'));
    const source = path.join(dir, 'source');
    const state = path.join(source, stateDir);
    mkdirSync(state, { recursive: true });
    mkdirSync(path.join(source, 'other'), { recursive: true });
    writeFileSync(path.join(source, 'a.txt'), 'a');
    writeFileSync(path.join(source, '.b.txt'), 'b');
    // A user's file of the same name outside the ledger's directory is an item like any other.
    writeFileSync(path.join(source, 'other', PROBE), 'mine');
    const db = path.join(state, 'cronsafe.db');
    const configPath = path.join(dir, 'cronsafe.yaml');
    writeFileSync(
      configPath,
      YAML.stringify({
        name: 'probe-job',
        source: { directory: source, include: ['**/*', '**/.*'] },
        handler: { command: COPY },
        output: { directory: path.join(dir, 'out') },
        state: { sqlite: db },
        lock: { path: path.join(state, 'cronsafe.lock') },
      }),
    );
    const first = await runCli(['run', '-c', configPath]);
    expect(first.code, first.stderr).toBe(0);
    // The probe a killed run left beside the ledger (its check made it while the ledger existed).
    writeFileSync(path.join(state, PROBE), Buffer.alloc(4096));
    const r = await runCli(['run', '-c', configPath]);
    expect(r.code, r.stderr).toBe(0);
    const probeId = stateDir === '' ? PROBE : `${stateDir}/${PROBE}`;
    // Before: the probe was scanned (scanned: 4), recorded, run and done.
    expect(finished(r)?.counts).toMatchObject({ scanned: 3 });
    expect(ledgerIds(db)).toEqual(['.b.txt', 'a.txt', `other/${PROBE}`]);
    expect(ledgerIds(db)).not.toContain(probeId);
    expect(readdirSync(path.join(dir, 'out'), { recursive: true }).filter((f) => String(f).includes(PROBE) && !String(f).startsWith('other'))).toEqual([]);
  }, 60_000);
});
