import { chownSync, readdirSync } from 'node:fs';
import path from 'node:path';

/** The unprivileged user a root test runs cronsafe as, so that file modes stop it. */
export const NOBODY = 65534;

/** chown -R, without following links: a run as `uid` owns its workspace. */
export function chownTree(dir: string, uid: number): void {
  chownSync(dir, uid, uid);
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory()) chownTree(path.join(dir, e.name), uid);
    else if (!e.isSymbolicLink()) chownSync(path.join(dir, e.name), uid, uid);
  }
}
