import { isUtf8 } from 'node:buffer';
import { readFileSync } from 'node:fs';

/**
 * Whether environment variable `name` of this process holds bytes that are not UTF-8.
 * Node decodes them to U+FFFD in process.env, so a `${VAR}` naming a Latin-1 file name
 * (caf<0xE9>.txt) would become another name, silently. Only a value holding U+FFFD is
 * asked about, from the process's own environment block (/proc/self/environ); false when
 * that cannot be read, or when `env` is not the process's own.
 */
export function envNotUtf8(name: string, value: string, env: NodeJS.ProcessEnv): boolean {
  if (!value.includes('\uFFFD') || env !== process.env) return false;
  let block: Buffer;
  try {
    block = readFileSync('/proc/self/environ');
  } catch {
    return false;
  }
  const prefix = Buffer.from(`${name}=`);
  for (let start = 0; start < block.length; ) {
    let end = block.indexOf(0, start);
    if (end < 0) end = block.length;
    const entry = block.subarray(start, end);
    if (entry.subarray(0, prefix.length).equals(prefix)) return !isUtf8(entry.subarray(prefix.length));
    start = end + 1;
  }
  return false;
}
