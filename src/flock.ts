import { createRequire } from 'node:module';
import { requireNative } from './descriptors.js';

// fs-ext is CommonJS with no types; flock(2) is what we need from it. Its native addon is
// loaded at the first lock: the modules that import this one come with every command.
const require = createRequire(import.meta.url);
type FsExt = { flockSync: (fd: number, flags: 'exnb' | 'un') => void; fcntlSync: (fd: number, cmd: number, arg: number) => number };
let fsExt: FsExt | undefined;

const fsExtNow = (): FsExt => (fsExt ??= requireNative<FsExt>(require, 'fs-ext', 'flock(2), to take the run lock'));

/** flock(2) on `fd`: 'exnb' takes it exclusively or throws EWOULDBLOCK/EAGAIN; 'un' lets go. */
export const flockSync = (fd: number, flags: 'exnb' | 'un'): void => fsExtNow().flockSync(fd, flags);

/** fcntl(2) on `fd` with a numeric command (F_SETLEASE is not among fs-ext's names); throws the errno as `code`. */
export const fcntlSync = (fd: number, cmd: number, arg: number): number => fsExtNow().fcntlSync(fd, cmd, arg);
