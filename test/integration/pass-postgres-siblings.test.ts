/**
 * The end of a shared pass on PostgreSQL (claim-loop.ts, passOver): a pod with nothing of
 * its own left ends its pass only when no sibling holds a claim of the pass that could come
 * back and nothing of the pass is claimable. Its last sweep and its look at the siblings are
 * two statements: a sibling's hand-back (a drain) that commits between them must be swept,
 * not left pending for the next pass. Real server, a real pass (runPass); the interleaving is
 * made certain by handing the sibling's claim back just before the pod's look at its siblings.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { openPostgresLedger, type PostgresLedger } from '../../src/ledger/postgres/index.js';
import type { DiscoveredItem, Settlement } from '../../src/ledger/types.js';
import { runPass } from '../../src/runner/pass.js';
import { workspace } from '../helpers/cli.js';
import { memoryLogger } from '../helpers/log.js';
import { PG_SKIP_REASON, usePostgresDatabase } from '../helpers/postgres.js';

const PASS = 'group:g';
const never = new AbortController().signal;
const none: Settlement = { complete: [], fail: [], release: [], gone: [] };

async function* source(ids: string[]): AsyncGenerator<DiscoveredItem> {
  for (const id of ids) yield { id };
}

describe.skipIf(PG_SKIP_REASON !== undefined)('the end of a shared pass (PostgreSQL, real server)', () => {
  const pg = usePostgresDatabase('passover');

  it("a sibling's hand-back that lands between the pod's last sweep and its look at the siblings is swept, not left pending", async () => {
    const ws = workspace({ handler: { command: ['true'] } });
    const config = loadConfig(ws.configPath);
    const ledger: PostgresLedger = await openPostgresLedger({ url: pg.url, schema: 'passover' });
    try {
      // Sibling B of the pass holds x (a live claim): the pod must wait for it.
      const now = Date.now();
      await ledger.discover([{ id: 'x' }], { runId: PASS, now });
      const { claims } = await ledger.settleOffered(none, now, { ids: ['x'], opts: { owner: 'pod-b', runId: PASS, now, leaseMs: 600_000, limit: 1 } });
      expect(claims.map((c) => c.id)).toEqual(['x']);
      // B drains: its hand-back commits after the pod's sweep found nothing, just before the
      // pod asks where its siblings stand.
      let handedBack = false;
      const wrapped = new Proxy(ledger, {
        get(target, key) {
          if (key === 'siblings') {
            return async (...args: Parameters<PostgresLedger['siblings']>) => {
              if (!handedBack) {
                handedBack = true;
                await target.settle({ ...none, release: [{ claim: claims[0]!, reason: 'handed back: run stopping' }] }, Date.now());
              }
              return target.siblings(...args);
            };
          }
          const v: unknown = Reflect.get(target, key, target);
          return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
        },
      });
      const seen: string[] = [];
      const { log } = memoryLogger();
      const r = await runPass({
        config,
        ledger: wrapped,
        handler: { run: async (item) => void seen.push(item.id) },
        log,
        runId: 'run-a',
        passId: PASS,
        owner: 'pod-a',
        stop: never,
        force: never,
        source: source(['a']),
      });
      expect(handedBack).toBe(true);
      expect(r.outcome).toBe('completed');
      expect(seen.sort()).toEqual(['a', 'x']);
      expect(await ledger.counts()).toEqual({ pending: 0, claimed: 0, done: 2, dead: 0 });
      // B's interrupted attempt was handed back, not charged: one charged attempt, A's.
      expect(await ledger.get('x')).toMatchObject({ state: 'done', attempts: 2, released: 1 });
    } finally {
      await ledger.close();
    }
  }, 60_000);
});
