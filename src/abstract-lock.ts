import { createHash } from 'node:crypto';
import { readlinkSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * An exclusive lock that is a Linux abstract unix socket named `name`: no file to remove,
 * only the holder's exit frees it (the kernel closes the socket, even on SIGKILL). It holds
 * within one network namespace (a pod, a host). Returns the release, null when another
 * process holds the name, or a no-op release where abstract sockets do not exist (not
 * Linux) or cannot be bound (a sandbox that refuses sockets).
 */
export async function takeAbstractLock(name: string): Promise<(() => void) | null> {
  if (process.platform !== 'linux') return () => {};
  const server = createServer();
  const bound = await new Promise<boolean | Error>((resolve) => {
    server.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'EADDRINUSE' ? false : err));
    server.listen({ path: `\0${name}`, exclusive: true }, () => resolve(true));
  });
  if (bound !== true) {
    server.close();
    return bound === false ? null : () => {};
  }
  // Holding the name must not keep a finished run alive; nobody ever connects to it.
  server.unref();
  server.on('connection', (socket) => socket.destroy());
  server.on('error', () => {}); // a listening name has nothing left to fail; never crash the run for it
  let released = false;
  return () => {
    if (released) return;
    released = true;
    server.close();
  };
}

/**
 * `<prefix>/` and a hash of the mount namespace and `parts`: two containers that each have
 * their own volume at the same path (host networking) do not lock each other out.
 */
export function abstractLockName(prefix: string, ...parts: string[]): string {
  let mounts = '';
  try {
    mounts = readlinkSync('/proc/self/ns/mnt');
  } catch {
    /* no /proc: the parts alone */
  }
  return `${prefix}/${createHash('sha256').update([mounts, ...parts].join('\0')).digest('hex').slice(0, 40)}`;
}
