import { loadConfig } from '../config/load.js';
import { openState } from './run.js';
import { oneLine } from './status.js';

/** `cronsafe dead-letter list`: every dead item with its attempts and last error. */
export async function deadLetterList(configPath: string, opts: { json: boolean }, out = process.stdout): Promise<number> {
  const config = loadConfig(configPath, { checkPaths: false });
  const ledger = await openState(config);
  try {
    const dead = await ledger.listDead();
    if (opts.json) {
      out.write(`${JSON.stringify(dead.map((d) => ({ id: d.id, attempts: d.attempts, lastError: d.lastError, deadAt: d.deadAt == null ? null : new Date(d.deadAt).toISOString() })), null, 2)}\n`);
    } else if (dead.length === 0) {
      out.write('no dead letters\n');
    } else {
      for (const d of dead) out.write(`${JSON.stringify(d.id)}\tattempts ${d.attempts}\t${oneLine(d.lastError)}\n`);
    }
    return 0;
  } finally {
    await ledger.close();
  }
}

/** `cronsafe dead-letter retry ID... | --all`: dead -> pending with attempts reset. */
export async function deadLetterRetry(
  configPath: string,
  ids: string[],
  opts: { all: boolean },
  out = process.stdout,
): Promise<number> {
  const config = loadConfig(configPath, { checkPaths: false });
  const ledger = await openState(config);
  try {
    const moved = await ledger.retryDead(opts.all ? 'all' : ids, Date.now());
    out.write(`requeued ${moved} dead item${moved === 1 ? '' : 's'}\n`);
    if (!opts.all && moved < ids.length) {
      out.write(`${ids.length - moved} of the given ids were not dead letters (unknown, or not dead)\n`);
      return 1;
    }
    return 0;
  } finally {
    await ledger.close();
  }
}
