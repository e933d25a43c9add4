import { closeSync, openSync, writeSync } from 'node:fs';

/** Write zeros into `file` until its file system refuses (ENOSPC): the file system is full then. */
export function fill(file: string): void {
  const fd = openSync(file, 'w');
  const chunk = Buffer.alloc(4096);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    closeSync(fd);
  }
}
