import { accessSync, constants, statSync, type Stats } from 'node:fs';
import path from 'node:path';

// How a program is found and whether it can be run, as execve and execvp see it: for
// handler.command's program (program.ts) and the program a #! line gives env (env-line.ts).

/** Where libuv's spawn looks for a bare name when the child's environment has no PATH (glibc's _PATH_DEFPATH). */
export const DEFAULT_PATH = '/usr/bin:/bin';

/** The directories of a PATH, as execvp reads them (an empty entry is the working directory). */
export const pathDirs = (cwd: string, PATH: string | undefined): string[] => (PATH ?? '').split(':').map((d) => path.resolve(cwd, d || '.'));

/** The file execvp runs for a bare `name`: the first executable file on PATH, whatever its format. */
export const onPath = (name: string, cwd: string, PATH: string | undefined): string | undefined =>
  pathDirs(cwd, PATH)
    .map((d) => path.join(d, name))
    .find((f) => accessProblem(f) === null);

/** stat, with an unsearchable directory on the way (EACCES) counted as "not there". */
export function statOf(file: string): Stats | undefined {
  try {
    return statSync(file, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

/** Why `file` is not an executable file, or null. */
export function accessProblem(file: string): string | null {
  const st = statOf(file);
  if (!st) return 'does not exist';
  if (!st.isFile()) return 'is not a file';
  try {
    accessSync(file, constants.X_OK);
  } catch {
    return 'is not executable';
  }
  return null;
}

/** Why a name from a #! line ends in \r, when it does: the script was saved with Windows line ends. */
export const crlf = (name: string): string => (name.endsWith('\r') ? ' (the #! line ends in a carriage return: the script has Windows (CRLF) line ends)' : '');

