import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** Direct children of every process, from /proc (Linux). */
function childrenByParent(): Map<number, number[]> {
  const byParent = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // exited while we looked
    }
    // Fields after the command name, which is in parentheses and may contain spaces.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    const kids = byParent.get(ppid) ?? [];
    kids.push(Number(name));
    byParent.set(ppid, kids);
  }
  return byParent;
}

/** `pid` and all its descendants (handlers run in their own process groups, so a group kill would miss them). */
export function processTree(pid: number): number[] {
  const byParent = childrenByParent();
  const out: number[] = [];
  const stack = [pid];
  while (stack.length > 0) {
    const p = stack.pop()!;
    out.push(p);
    stack.push(...(byParent.get(p) ?? []));
  }
  return out;
}

const signal = (pid: number, sig: NodeJS.Signals) => {
  try {
    process.kill(pid, sig);
  } catch {
    /* already gone */
  }
};

/**
 * SIGKILL a process and every descendant at once, as an eviction or a node loss would.
 * The root is stopped first, so it cannot spawn a child between the listing and the kill.
 */
export function killTree(pid: number): number[] {
  signal(pid, 'SIGSTOP');
  const tree = processTree(pid);
  for (const p of tree) signal(p, 'SIGSTOP');
  // Children forked before the stop landed are listed by a second look.
  const all = [...new Set([...tree, ...processTree(pid)])];
  for (const p of all) signal(p, 'SIGKILL');
  return all;
}

/** Handler starts per item id, from a handler's own log of "<id> <attempt>" lines (test/fixtures/process/logged-copy.sh). */
export function invocations(file: string): Map<string, number> {
  const byId = new Map<string, number>();
  if (!existsSync(file)) return byId;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line) continue;
    const id = line.slice(0, line.lastIndexOf(' '));
    byId.set(id, (byId.get(id) ?? 0) + 1);
  }
  return byId;
}

/**
 * A command handler script in `dir` (`[script, '{path}', '{output}']`, MARKER_DIR in its
 * environment naming a directory for its markers) that logs its start to `<markers>/invocations` (see invocations), copies its
 * input and, the first time the sh condition `when` holds, stops its parent, cronsafe's helper
 * that forks handlers (SIGSTOP), and exits 0: a child whose exit cannot be reported until
 * something wakes the helper. The helper's pid is in `<markers>/helper` (written whole) and
 * the handler's in `<markers>/pid` before the stop. Returns the script's path.
 */
export function copyThenStopHelperScript(dir: string, when = 'true'): string {
  const script = path.join(dir, 'copy-then-stop-helper.sh');
  writeFileSync(
    script,
    [
      '#!/bin/sh',
      'echo "$CRONSAFE_ITEM_ID $CRONSAFE_ATTEMPT" >> "$MARKER_DIR/invocations"',
      'cat "$1" > "$2" || exit 1',
      `if ${when} && [ ! -e "$MARKER_DIR/helper" ]; then echo $PPID > "$MARKER_DIR/helper.tmp"; echo $$ > "$MARKER_DIR/pid"; mv "$MARKER_DIR/helper.tmp" "$MARKER_DIR/helper"; kill -STOP $PPID; fi`,
      'exit 0',
      '',
    ].join('\n'),
    { mode: 0o755 },
  );
  return script;
}
