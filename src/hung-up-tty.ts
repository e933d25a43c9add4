import { closeSync, fstatSync } from 'node:fs';
import { createRequire } from 'node:module';

// node:tty loads node:net and the stream stack (~5 ms): only at the exit, and only for a character device.
const load = createRequire(import.meta.url);

/** Linux's memory devices (/dev/null, /dev/zero, /dev/full): character devices, never terminals. */
const MEM_MAJOR = 1;

/**
 * Close those of fds 0-2 that are a terminal which has hung up, just before the process
 * exits. At exit Node restores the terminal modes of each stdio fd that was a terminal at
 * start (ResetStdio), and Node 20 (and 22 before the fix of nodejs/node#51519) aborts when
 * that tcsetattr fails, as it does with EIO on a hung-up terminal: a run stopped by the
 * SIGHUP of a closed terminal (an SSH session dropped) drained, then ended in SIGSEGV (exit
 * 139, a core dump) instead of 75 or 0. A hung-up terminal's every ioctl fails, so isatty()
 * says false for a character device that was one; Node skips an fd that is closed. A
 * /dev/null or /dev/full (2>/dev/full) stays open: an exit listener may still write to it.
 */
export function closeHungUpTerminals(): void {
  for (const fd of [0, 1, 2]) {
    try {
      const st = fstatSync(fd);
      if (!st.isCharacterDevice() || ((st.rdev >> 8) & 0xfff) === MEM_MAJOR) continue;
      if (!(load('node:tty') as typeof import('node:tty')).isatty(fd)) closeSync(fd);
    } catch {
      // Closed already: Node skips a closed fd.
    }
  }
}
