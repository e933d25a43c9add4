import { ConfigError, coerceError } from '../errors.js';
import { assertFires, parseCron } from '../schedule/cron.js';

/**
 * The config check asks Kubernetes' dialect; the daemon fires by Vixie's, where a day of week
 * starting with `*` never widens the days: a ConfigError (78) for an expression that never
 * fires so (the daemon would wait forever, silent). `cronsafe schedule --daemon` asks it too.
 */
export function assertDaemonFires(configPath: string, cron: string): void {
  try {
    assertFires(parseCron(cron), 'vixie');
  } catch (err) {
    throw new ConfigError(`${configPath}: schedule.cron: ${coerceError(err).message} (as cronsafe daemon reads it: a day of week starting with "*" does not add days)`, configPath, 'schedule.cron');
  }
}
