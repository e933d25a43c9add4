import { afterEach, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/types.js';
import { ConfigError, StateUnavailable } from '../../src/errors.js';
import { openStore } from '../../src/ledger/open.js';
import type { RunLock } from '../../src/ledger/run-lock.js';
import { memoryLogger } from '../helpers/log.js';

/**
 * The store seam every adapter must show (ledger/open.ts): the run lock it gives keeps a
 * second run out until released, and the ledger it opens says whether runs share a pass.
 * `config()` names a fresh, empty store each call.
 *
 *   storeContract('sqlite', () => loadConfig(workspace({...}).configPath), { shared: false });
 */
export function storeContract(name: string, config: () => Config, expected: { shared: boolean }): void {
  describe(`Store contract: ${name}`, () => {
    const held: RunLock[] = [];
    afterEach(async () => {
      for (const lock of held.splice(0)) await lock.release();
    });
    const { log } = memoryLogger();
    const take = async (c: Config, owner: string): Promise<RunLock | null> => {
      const lock = await openStore(c).takeRunLock(owner, log);
      if (lock) held.push(lock);
      return lock;
    };

    it('takeRunLock keeps a second run out while the first holds it, and lets it in once released', async () => {
      const c = config();
      const first = await take(c, 'host-a:101:run-1');
      expect(first).not.toBeNull();
      // Another store on the same config: what a second process (or pod) would open.
      expect(await take(c, 'host-b:202:run-2')).toBeNull();
      expect(await take(c, 'host-b:202:run-3')).toBeNull();
      await first!.release();
      await first!.release(); // idempotent: the engine's finally may release after a skip did
      const second = await take(c, 'host-b:202:run-4');
      expect(second).not.toBeNull();
      expect(await take(c, 'host-a:101:run-5')).toBeNull();
    });

    it('locks per store: a run of another job (its own store) is not kept out', async () => {
      expect(await take(config(), 'host-a:101:run-1')).not.toBeNull();
      expect(await take(config(), 'host-b:202:run-2')).not.toBeNull();
    });

    it(`opens a ledger whose shared is ${expected.shared}`, async () => {
      const c = config();
      const lock = await take(c, 'host-a:101:run-1');
      const ledger = await openStore(c).openLedger({ writeBehind: true });
      try {
        expect(ledger.shared).toBe(expected.shared);
        expect(lock?.group !== undefined).toBe(expected.shared); // a shared store names the pass the pods share
      } finally {
        await ledger.close();
      }
    });

    it('refuses a ledger of another job (ConfigError), and names the store when a write fails', async () => {
      const c = config();
      await (await openStore(c).openLedger()).close();
      const other = { ...c, name: 'another-job' };
      await expect(openStore(other).openLedger()).rejects.toBeInstanceOf(ConfigError);
      const err = openStore(c).unavailable('cannot requeue', new Error('disk full'));
      expect(err).toBeInstanceOf(StateUnavailable);
      expect(err.exitCode).toBe(1);
      expect(err.message).toMatch(/^state store unavailable \((sqlite \/.+|postgres)\): cannot requeue: disk full$/);
    });
  });
}
