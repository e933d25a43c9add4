import type { Config } from '../config/types.js';
import type { Ledger } from '../ledger/types.js';

/**
 * After an operator command moved items (`dead-letter retry`, `requeue`): push the ledger's
 * metrics when a Pushgateway is configured, so the dead-letter gauge and the requeue total
 * move now, not at the next run (a daily job would page on retried dead letters all day).
 * Warnings go to stderr: stdout is the command's own output. Never rejects.
 */
export async function pushAfterChange(config: Config, ledger: Ledger, reason: string): Promise<void> {
  if (config.metrics?.pushgateway === undefined) return;
  const loaded = await Promise.all([import('../log.js'), import('../metrics/index.js')]).catch((err: unknown) => {
    process.stderr.write(`cronsafe: metrics not pushed: ${err instanceof Error ? err.message : String(err)}\n`);
  });
  if (!loaded) return;
  const [{ createLogger }, { pushLedgerMetrics }] = loaded;
  const log = createLogger(config.log, { write: (line: string) => process.stderr.write(line) }).child({ job: config.name });
  await pushLedgerMetrics({ config, ledger, log }, reason);
}
