import { accessSync, constants, statSync, type Stats } from 'node:fs';
import path from 'node:path';

/** A placeholder in argv[0] (`{path}`: run the item itself) can only be checked per item. */
const PLACEHOLDER = /\{(path|id|output|attempt)\}/;

/**
 * Why `program` (handler.command's argv[0]) cannot be run, or null when it can. Resolved
 * as spawn will: a name with a `/` is a path (relative ones against `cwd`, the handler's
 * working directory, which is source.directory); a bare name is looked up on `PATH` (the
 * child's: handler.env's PATH wins over cronsafe's own). It must be a file with execute
 * permission for us.
 */
export function programProblem(program: string, cwd: string, PATH: string | undefined): string | null {
  if (PLACEHOLDER.test(program)) return null;
  if (program.includes('/')) {
    const file = path.resolve(cwd, program);
    const problem = fileProblem(file);
    return problem && `${JSON.stringify(program)}${file === program ? '' : ` (${file})`} ${problem}`;
  }
  const dirs = (PATH ?? '').split(':').map((d) => path.resolve(cwd, d || '.'));
  const found = dirs.map((d) => path.join(d, program)).find((f) => fileProblem(f) === null);
  if (found) return null;
  // Present but not executable somewhere on PATH is worth saying: it is the likely mistake.
  const there = dirs.map((d) => path.join(d, program)).find((f) => statOf(f)?.isFile());
  if (there) return `${JSON.stringify(program)} found on PATH as ${there}, but it is not executable`;
  return `${JSON.stringify(program)} not found on PATH (${PATH ?? '(PATH is not set)'})`;
}

/** stat, with an unsearchable directory on the way (EACCES) counted as "not there". */
function statOf(file: string): Stats | undefined {
  try {
    return statSync(file, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

function fileProblem(file: string): string | null {
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
