import { statSync } from 'node:fs';
import path from 'node:path';
import type { Config } from '../config/types.js';
import { PLACEHOLDER, SCRIPT_NAME } from '../handler-args.js';
import { storeFiles, storeProbes } from '../ledger/store-files.js';
import { climbsOut, whereItIs } from '../real-path.js';

/**
 * Files and directories of cronsafe's own that may sit inside source.directory and are never
 * items. The config file too: in the source (`source.directory: .` beside it), or a link or
 * hard link there to it, it was handed to the handler, secrets (a PostgreSQL URL, handler.env)
 * and all, and a handler that removes its input deleted it, so that every later run failed.
 */
export function ownFiles(config: Config): string[] {
  return [config.output?.directory, ...storeFiles(config.state), config.lock.path, config.configPath, ...handlerFiles(config)].filter((p): p is string => !!p);
}

/** Name beginnings of cronsafe's own short-lived files (ScanOptions.skipPrefixes): the ledger's quota probe. */
export const ownFilePrefixes = (config: Config): string[] => storeProbes(config.state);

/**
 * The handler's own files inside source.directory: handler.module, handler.command's program
 * named by a path, and the files its other literal arguments name by a path or a script's name
 * (`python3 qc.py {path}`, `jq -f filters/q.jq`; not a bare word such as `libx264` or `90`,
 * which an item at the top of the source may be called), resolved as the child resolves them
 * (against source.directory, its working directory). So a
 * relative one sits among the items, and was one: the handler ran on its own script, and one
 * that removes its input deleted its program, stopping every later run (exit 78). Only those
 * inside the source: one elsewhere with more than one name (a hard link such as /usr/bin/perl)
 * would have every scan stat every file to look for it.
 */
function handlerFiles(config: Config): string[] {
  const source = config.source.directory;
  const { command = [], module } = config.handler;
  // A bare program name is looked up on PATH, not in the working directory.
  const named = command.filter((arg, i) => arg !== '' && !PLACEHOLDER.test(arg) && (arg.includes('/') || (i > 0 && SCRIPT_NAME.test(arg))));
  return [...(module === undefined ? [] : [module]), ...named].map((arg) => path.resolve(source, arg)).filter((file) => inside(source, file) && isFile(file));
}

/** Whether `file` is under `dir`, by its path as written or by real paths (a link on either side). */
function inside(dir: string, file: string): boolean {
  const under = (d: string, f: string): boolean => {
    const rel = path.relative(d, f);
    return rel !== '' && !climbsOut(rel);
  };
  return under(path.resolve(dir), file) || under(whereItIs(path.resolve(dir)), whereItIs(file));
}

function isFile(file: string): boolean {
  try {
    return statSync(file, { throwIfNoEntry: false })?.isFile() ?? false;
  } catch {
    return false; // ENAMETOOLONG (inline code taken for a name), ENOTDIR, EACCES: no file of the handler's
  }
}
