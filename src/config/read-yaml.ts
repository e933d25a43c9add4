import { isUtf8 } from 'node:buffer';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import YAML from 'yaml';
import { ConfigError, coerceError } from '../errors.js';
import { decodeEscaping } from '../utf8-bytes.js';
import { escapeForTerminal } from '../terminal-safe.js';

// node:tty loads node:net and the stream stack (~7 ms of every start that makes no stdio
// stream, a lock-skipped run's): only for a config that is a character device, as a terminal is.
const load = createRequire(import.meta.url);

/** A cron expression (`schedule.cron`) written unquoted with a leading `*` or `@`. */
const UNQUOTED_CRON = /^(\s*cron\s*:\s*)([*@][^#]*?)\s*(?:#.*)?$/;

// Reading the config file: bounded (a FIFO or /dev/zero is not read forever), parsed as
// YAML with duplicate keys refused; errors name the file.

/** The text a byte that is not UTF-8 is read as (readBounded): U+DC00 + the byte, U+DC80-U+DCFF. */
const NOT_UTF8_BASE = 0xdc00;
const NOT_UTF8 = /[\udc80-\udcff]/;
const NOT_UTF8_ALL = /[\udc80-\udcff]/g;
/** Those bytes as `\xHH`, as ids write them. */
const shownBytes = (text: string): string => text.replace(NOT_UTF8_ALL, (c) => `\\x${(c.charCodeAt(0) - NOT_UTF8_BASE).toString(16).padStart(2, '0')}`);

/** A config is a page of YAML; past this it is a mistake (or /dev/zero), not a config. */
export const MAX_CONFIG_BYTES = 1024 * 1024;
/** How long a FIFO's writer may take to send the config. */
const FIFO_WAIT_MS = 10_000;

/**
 * At most MAX_CONFIG_BYTES + 1 bytes, whatever the file is: readFileSync would read a
 * FIFO or /dev/zero until the heap gives out, and a huge file into a huge parse.
 */
function readBounded(abs: string): { text: string; tooBig: boolean; lossy: boolean } {
  // A FIFO is opened without blocking: with no writer, a blocking open would hang the
  // process before any signal handler could run (only SIGKILL would end it). A writer may
  // still come (`mkfifo f; gen > f & cronsafe -c f`), so nothing read yet is waited for,
  // in short naps, up to FIFO_WAIT_MS; `-c <(generate-config)` is read to its end.
  const fifo = fs.statSync(abs, { throwIfNoEntry: false })?.isFIFO() === true;
  const fd = fs.openSync(abs, fifo ? fs.constants.O_RDONLY | fs.constants.O_NONBLOCK : 'r');
  try {
    // `-c /dev/stdin` typed with nothing piped in: the read below blocks the event loop, so
    // neither Ctrl-C nor SIGTERM could end it (their handlers run on it), only Ctrl-D.
    if (fs.fstatSync(fd).isCharacterDevice() && (load('node:tty') as typeof import('node:tty')).isatty(fd)) throw new ConfigError(`config file ${abs} is a terminal: cronsafe would wait for the config to be typed; redirect or pipe it in (-c /dev/stdin < job.yaml)`, abs);
    const buf = Buffer.allocUnsafe(MAX_CONFIG_BYTES + 1);
    let n = 0;
    // Silence, not the whole read: a writer that sends a line a second is still waited for.
    let deadline = Date.now() + FIFO_WAIT_MS;
    while (n < buf.length) {
      let got: number;
      try {
        got = fs.readSync(fd, buf, n, buf.length - n, null);
      } catch (err) {
        // A FIFO's writer that has not written yet: wait a little, not for ever.
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
        got = -1;
      }
      // EAGAIN (a writer, no data yet), or end of file with nothing read (no writer yet).
      if (fifo && (got === -1 || (got === 0 && n === 0))) {
        if (Date.now() > deadline) throw new ConfigError(`config file ${abs} is a FIFO whose writer sent nothing (more) for ${FIFO_WAIT_MS / 1000} s`, abs);
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
        continue;
      }
      if (got <= 0) break;
      n += got;
      deadline = Date.now() + FIFO_WAIT_MS;
    }
    const bytes = buf.subarray(0, Math.min(n, MAX_CONFIG_BYTES));
    // Bytes that are not UTF-8 are said when they land in a key or value (readYaml). Read as
    // lone surrogates (U+DC80-U+DCFF), as Python's surrogateescape reads them, not as U+FFFD:
    // the message shows each as the byte it was (\xHH), at its byte offset.
    if (isUtf8(bytes)) return { text: bytes.toString('utf8'), tooBig: n > MAX_CONFIG_BYTES, lossy: false };
    return { text: decodeEscaping(bytes, (byte) => String.fromCharCode(NOT_UTF8_BASE + byte)), tooBig: n > MAX_CONFIG_BYTES, lossy: true };
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * More YAML tokens than a config written by hand has (20,000 keys are ~140,000). The parse
 * keeps ~1.5 KB per token while it builds the document: 1 MiB of `[1,1,1,...` (1.5 million
 * tokens) took 540 MB and 40 s, past the chart's 512Mi limit (OOM-killed, exit 137 counted
 * toward backoffLimit, not 78). Counting them first takes no memory and stops at the limit.
 */
const MAX_TOKENS = 200_000;
function tooManyTokens(text: string): boolean {
  let n = 0;
  for (const _token of new YAML.Lexer().lex(text)) if (++n > MAX_TOKENS) return true;
  return false;
}

/**
 * The library's messages that quote the text they stopped at, said without it: written
 * unquoted, that text is the start of a value, maybe a password's (`DB_PASSWORD: |Hunter2`),
 * which went to the pod's log. The line and column say where it is.
 */
const QUOTING: ReadonlyArray<[RegExp, string]> = [
  [/^Could not resolve tag: .*$/s, 'a tag with an undeclared handle ("!x!..."): a value that starts with "!" must be quoted'],
  [/^(Not a valid tag: |Verbatim tags aren't resolved, so |The .* tag has no suffix).*$/s, 'a tag that is not valid: a value that starts with "!" must be quoted'],
  [/^Block scalar header includes extra characters: .*$/s, 'characters after a block scalar indicator ("|" or ">"): a value that starts with "|" or ">" must be quoted'],
  [/^Invalid escape sequence .*$/s, "an escape sequence that YAML does not have, in a double-quoted string: write a backslash as \\\\, or quote the value with ' instead"],
  // Each token after the end of the document, as it is written: `Unexpected scalar token in YAML stream: "Hunter2"`.
  [/^(Unexpected [\w-]+ token in YAML stream): .*$/s, '$1'],
];
const withoutSource = (message: string): string => {
  const quoting = QUOTING.find(([re]) => re.test(message));
  return quoting ? message.replace(quoting[0], quoting[1]) : message;
};

/**
 * Why a config path that names no file may have been meant as another: `-c -` (standard input,
 * as `kubectl -f -` reads it), `-c=job.yaml` (a short option's value is "=job.yaml"), a space
 * or line break at an end (`CRONSAFE_CONFIG: "job.yaml "` in a manifest: unseen in the message), or a
 * name in bytes that are not UTF-8, which Node reads with U+FFFD (the file is there, `ls`
 * shows it). Said only of a path that is not there.
 */
function notFoundHint(abs: string): string {
  // `ls` lists the config, as a link: to a file not there (a ConfigMap's key not in it, a
  // volume not mounted). "Not found" alone sent people looking at the path they gave.
  const link = linkTarget(abs);
  if (link !== undefined) return ` (it is a symbolic link to ${JSON.stringify(link)}, which leads to no file)`;
  const name = path.basename(abs);
  if (name === '-') return ' (for standard input, give -c /dev/stdin)';
  const given = path.relative(process.cwd(), abs);
  if (given.startsWith('=')) return ' (-c=FILE is read as the path "=FILE": write -c FILE or --config=FILE)';
  // `CRONSAFE_CONFIG=~/job.yaml` in a systemd unit or a manifest, or `-c ~/job.yaml` quoted:
  // no shell expanded it, so it named a directory "~" in the working directory.
  if (/^~(\/|$)/.test(given)) return ' (a leading "~" is not the home directory: no shell expanded it; write the path absolute, or $HOME/... where a shell reads it)';
  if (name.trim() !== name) return ` (the path begins or ends with a space or line break: ${JSON.stringify(abs)})`;
  if (abs.includes('\uFFFD')) return ' (the path held bytes that are not UTF-8, which Node reads as U+FFFD, so it names another file: rename the file, or give a link to it with a UTF-8 name)';
  return '';
}

/** What the link at `abs` points to, when it is one. */
function linkTarget(abs: string): string | undefined {
  try {
    return fs.readlinkSync(abs);
  } catch {
    return undefined;
  }
}

/** Words for the errors a read of the config can meet (the code stays, for a search). */
const READ_ERRORS: Record<string, string> = {
  ELOOP: 'a loop of symbolic links',
  EACCES: 'permission denied',
  ENOTDIR: 'a part of the path is a file, not a directory',
  ENAMETOOLONG: 'the path is too long',
};

/** ` (a.yaml, b.yml)`: the YAML files in a directory given as the config, if any (a few). */
function yamlFilesIn(dir: string): string {
  try {
    const names = fs.readdirSync(dir).filter((n) => /\.ya?ml$/i.test(n)).sort();
    if (names.length === 0) return '';
    return ` (${names.slice(0, 5).join(', ')}${names.length > 5 ? ', ...' : ''})`;
  } catch {
    return '';
  }
}

export function readYaml(file: string, abs: string): unknown {
  let text: string;
  let lossy: boolean;
  try {
    const read = readBounded(abs);
    if (read.tooBig) {
      throw new ConfigError(`config file ${abs} is larger than the 1 MiB limit (${MAX_CONFIG_BYTES} bytes)`, abs);
    }
    text = read.text;
    lossy = read.lossy;
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new ConfigError(`config file not found: ${abs}${notFoundHint(abs)}`, abs);
    // The directory a ConfigMap is mounted at (CRONSAFE_CONFIG=/etc/cronsafe), not the file in it.
    if (code === 'EISDIR') throw new ConfigError(`config file ${abs} is a directory: give the config file in it${yamlFilesIn(abs)}`, abs);
    const what = code === undefined ? undefined : READ_ERRORS[code];
    throw new ConfigError(`cannot read config file ${abs}: ${what !== undefined ? `${what} (${code})` : (code ?? String(err))}`, abs);
  }
  if (tooManyTokens(text)) {
    throw new ConfigError(
      `${file}: invalid YAML: more than ${MAX_TOKENS} YAML tokens (keys, values, indicators, line ends): a config is a page of YAML, not a data file`,
      abs,
    );
  }
  // uniqueKeys off: the library compares every key with every other (quadratic: a 1 MiB
  // file of keys took minutes); duplicateKeyError does the same check with a Set.
  const lineCounter = new YAML.LineCounter();
  // resolveKnownTags off: YAML 1.1's !!omap and !!set became a JS Map or Set, which read as an
  // empty mapping (every key in it ignored, unknown ones too), and !!binary, !!timestamp
  // as "a mapping". Not in YAML 1.2's core schema, such tags are now left out: the value is
  // the plain list, mapping or string written, checked like any other.
  const doc = YAML.parseDocument(text, { prettyErrors: true, uniqueKeys: false, lineCounter, resolveKnownTags: false });
  if (doc.errors.length === 0) {
    // `%YAML 1.1` switches the library to YAML 1.1, where `on` is true, `010` is 8, `<<` merges,
    // and !!omap and !!set become a Map or Set read as an empty mapping (every key in it
    // ignored, unknown ones too). The config is YAML 1.2, as the docs and the other checks say.
    if (doc.directives?.yaml.explicit === true && doc.directives.yaml.version !== '1.2') {
      const at = Math.max(0, /^%YAML/m.exec(text)?.index ?? 0);
      const pos = lineCounter.linePos(at);
      throw new ConfigError(
        `${file}:${pos.line}:${pos.col}: invalid YAML: %YAML ${doc.directives.yaml.version}: cronsafe reads YAML 1.2 (yes, no, on and off are strings, 010 is ten, no "<<" merge keys, no !!omap or !!set): remove the directive`,
        abs,
      );
    }
    const aliases = aliasTargets(doc);
    if (aliases.tooMany !== undefined) {
      const pos = lineCounter.linePos(aliases.tooMany);
      throw new ConfigError(
        `${file}:${pos.line}:${pos.col}: invalid YAML: more than ${MAX_ALIASES} aliases (*name): a config needs a few; write the values out`,
        abs,
      );
    }
    // A node that names its line, column and key path, and says what is wrong there.
    const refuse = (at: { offset: number; key: string }, what: string): never => {
      const pos = lineCounter.linePos(at.offset);
      throw new ConfigError(`${file}:${pos.line}:${pos.col}: ${at.key ? `${at.key}: ` : ''}invalid YAML: ${what}`, abs, at.key || undefined);
    };
    // A key written `~`, `null` or left empty is YAML null, which the library turns into the
    // key "": the error said `"": unknown key`, naming nothing that was written.
    const nil = nullKey(doc, aliases.targets);
    if (nil !== undefined) {
      refuse(
        nil,
        nil.written === ''
          ? 'a key left empty is YAML null, not a name: write the key meant'
          : `the key ${nil.written} is YAML null, not a name: write the key meant (quoted, "${nil.written.replace(/^\*/, '')}", if that is the name)`,
      );
    }
    const dup = duplicateKey(doc, aliases.targets);
    if (dup !== undefined) {
      const pos = lineCounter.linePos(dup.offset);
      const what = dup.collection ? 'a key that is a list or mapping (keys are names)' : 'duplicate key (a mapping holds each key once)';
      throw new ConfigError(`${file}:${pos.line}:${pos.col}: ${dup.key}: invalid YAML: ${what}`, abs, dup.key);
    }
    // An alias inside the node its anchor names (`x: &a {b: *a}`). The parser builds such a
    // value as a cycle, on which every later walk of the config recursed until the stack
    // overflowed: exit 1 and a stack trace instead of a config error. An alias can only name
    // an anchor before it, so a cycle always has its alias under the anchored node.
    const cycle = firstAlias(doc, aliases.targets, (target, ancestors) => target !== undefined && ancestors.includes(target));
    if (cycle !== undefined) refuse(cycle, `the alias *${cycle.anchor} is inside the node it names (&${cycle.anchor}), which would contain itself without end`);
    // A value written unquoted that starts with "*": its name was quoted by the library's
    // error ("Unresolved alias ...: <name>"), a password's, with neither line nor key.
    const dangling = firstAlias(doc, aliases.targets, (target) => target === undefined);
    if (dangling !== undefined) refuse(dangling, 'an alias ("*name") with no anchor ("&name") before it: a value that starts with "*" must be quoted');
    // The library's own check (toJS below) names neither the line nor the key of the alias.
    const bomb = firstAlias(doc, aliases.targets, aliasUses(aliases.targets));
    if (bomb !== undefined) {
      refuse(bomb, `the alias *${bomb.anchor} makes more than ${MAX_ANCHOR_USES} uses of an anchor's content, counting the aliases inside it (an "alias bomb"?): write the values out`);
    }
    // A value written unquoted that starts with "!" is a tag the library cannot apply: it only
    // warned, and the value was what followed the tag (`PW: !Hunter2` was the empty string).
    const tag = unappliedTag(doc);
    if (tag !== undefined) {
      refuse(tag, 'a tag ("!name" before the value) that cannot be applied: a value that starts with "!" must be quoted, and a standard tag (!!int, !!bool, ...) must fit its value');
    }
    const mangled = lossy ? notUtf8(doc) : undefined;
    if (mangled !== undefined) {
      const pos = lineCounter.linePos(mangled.offset);
      // The first such byte in the file: none before it, so the text before it is the bytes before it.
      const first = NOT_UTF8.exec(text);
      const at = first === null ? '' : `, the first at byte offset ${Buffer.byteLength(text.slice(0, first.index))} (${shownBytes(first[0])})`;
      // The key as its bytes are: its bytes that are not UTF-8 as \xHH, the rest as the
      // terminal may show it (escapeForTerminal); they were U+FFFD, the mangled text echoed.
      const key = mangled.key ? escapeForTerminal(shownBytes(mangled.key)) : '';
      throw new ConfigError(
        `${file}:${pos.line}:${pos.col}: ${key ? `${key}: ` : ''}invalid YAML: bytes that are not UTF-8${at} (a file saved as Latin-1 or UTF-16?): save the file as UTF-8; a file name that is not UTF-8 is written as its id, with \\xHH escapes (caf\\xe9.txt)`,
        abs,
        key || undefined,
      );
    }
  }
  // Lists or mappings inside each other past what the parser's recursion can follow: said
  // "Maximum call stack size exceeded", then a follow-on error per level (786 lines).
  const tooDeep = doc.errors.find((e) => e.code === 'RESOURCE_EXHAUSTION');
  if (tooDeep !== undefined) {
    const pos = tooDeep.linePos?.[0];
    throw new ConfigError(
      `${file}${pos ? `:${pos.line}:${pos.col}` : ''}: invalid YAML: lists or mappings nested too deeply to be read (hundreds of levels of [, { or - inside each other): a config is a few levels deep`,
      abs,
    );
  }
  // Saved with a carriage return alone at each line end (classic Mac OS, some editors' "CR"
  // setting, a tr that missed): YAML reads no line end at all, the whole file is one line, and
  // the library said "Nested mappings are not allowed in compact mappings" once per key.
  if (doc.errors.length > 0 && !text.includes('\n') && /\r(?!\n)/.test(text)) {
    throw new ConfigError(
      `${file}: invalid YAML: its lines end in a carriage return alone (CR, as classic Mac OS wrote them), which YAML does not read as a line end, so the whole file is one line: save it with LF (or CRLF) line ends`,
      abs,
    );
  }
  if (doc.errors.length > 0) {
    // `cron: */5 * * * *` unquoted: YAML reads each `*` as an alias (and `@daily` as a reserved
    // character), which said "Unexpected alias at node end" once per star. One error for the
    // line says what to do instead.
    const cron = new Set<number>();
    // `lease: {seconds: ${LEASE}}`: in a flow mapping or list, the "{" of an unquoted "${" opens
    // a mapping, and the errors went on token by token after it. One error for the line says
    // what to do instead (naming the variable, never a default, which may be a password).
    const written = text;
    const opensReference = (e: YAML.YAMLError): boolean => written[e.pos[0]] === '{' && written[e.pos[0] - 1] === '$';
    const reference = new Set(doc.errors.filter(opensReference).map((e) => e.linePos?.[0].line));
    const said = new Set<number>();
    // After the document has ended, the library says each token left, one error each.
    let afterEnd = false;
    const sourceLines = written.split('\n');
    const lines = doc.errors.flatMap((e) => {
      const pos = e.linePos?.[0];
      const reopens = pos !== undefined && reference.has(pos.line);
      if (reopens && (said.has(pos.line) || !opensReference(e))) return [];
      if (!reopens && / token in YAML stream/.test(e.message)) {
        if (afterEnd) return [];
        afterEnd = true;
      }
      if (reopens) {
        said.add(pos.line);
        const ref = /^\$\{([A-Za-z_][A-Za-z0-9_]*)(\})?/.exec(written.slice(e.pos[0] - 1));
        const shown = ref === null ? '${...}' : `\${${ref[1]}${ref[2] ? '' : '...'}}`;
        return [`${file}:${pos.line}:${pos.col - 1}: invalid YAML: a "\${" in a flow mapping or list ({...} or [...]) must be quoted: write "${shown}"`];
      }
      const unquoted = pos && UNQUOTED_CRON.exec(sourceLines[pos.line - 1] ?? '');
      if (pos && unquoted) {
        if (cron.has(pos.line)) return [];
        cron.add(pos.line);
        const value = unquoted[2]!.trimEnd();
        return [`${file}:${pos.line}:${unquoted[1]!.length + 1}: invalid YAML: a value that starts with "${value[0]}" must be quoted: write ${unquoted[1]!.trim()} "${value}"`];
      }
      const where = pos ? `${file}:${pos.line}:${pos.col}` : file;
      const text =
        e.code === 'MULTIPLE_DOCS'
          ? 'expected one document, found a second one (remove the "---" line)'
          : withoutSource(e.message.replace(/ at line \d+, column \d+:[\s\S]*$/, ''));
      return [`${where}: invalid YAML: ${text}`];
    });
    throw new ConfigError(lines.join('\n'), abs);
  }
  try {
    // The alias cap stops a "billion laughs" file from expanding into gigabytes (aliasUses
    // refused it first, naming the alias).
    return doc.toJS({ maxAliasCount: MAX_ANCHOR_USES });
  } catch (err) {
    throw new ConfigError(`${file}: invalid YAML: ${coerceError(err).message}`, abs);
  }
}

/**
 * The first key that repeats one before it in the same mapping, if any (linear): its
 * offset, and its path as other config errors name keys (`handler.timeoutSeconds`,
 * `source.include[0].a`), since every error names its key. A key written as an alias
 * (`&k concurrency: 2` ... `*k : 64`) is the name it stands for: skipped, it set the key a
 * second time, silently. A key that is a list or mapping (`? [a, b]`) is `collection`: the
 * library turned it into the text "[ a, b ]" with a Node warning on stderr.
 */
function duplicateKey(doc: YAML.Document, targets: AliasTargets): { offset: number; key: string; collection?: boolean } | undefined {
  let found: { offset: number; key: string; collection?: boolean } | undefined;
  YAML.visit(doc, {
    Map(_key, map, ancestors) {
      const seen = new Set<string>();
      for (const pair of map.items) {
        const written = pair.key as YAML.Node | null;
        const k = YAML.isAlias(written) ? targets.get(written) : written;
        const offset = written?.range?.[0] ?? 0;
        if (YAML.isCollection(k)) {
          found = { offset, key: keyPath([...ancestors, map], YAML.isAlias(written) ? `*${written.source}` : String(k)), collection: true };
          return YAML.visit.BREAK;
        }
        if (!YAML.isScalar(k)) continue;
        const name = String(k.value);
        if (seen.has(name)) {
          found = { offset, key: keyPath([...ancestors, map], name) };
          return YAML.visit.BREAK;
        }
        seen.add(name);
      }
      return undefined;
    },
  });
  return found;
}

/**
 * The first key that is YAML null (`~`, `null`, `Null`, `NULL`, an empty key, or an alias of
 * one), with the key as written: the library reads it as the key "". No config key is null.
 */
function nullKey(doc: YAML.Document, targets: AliasTargets): { offset: number; key: string; written: string } | undefined {
  let found: { offset: number; key: string; written: string } | undefined;
  YAML.visit(doc, {
    Map(_key, map, ancestors) {
      for (const pair of map.items) {
        const written = pair.key as YAML.Node | null;
        const k = YAML.isAlias(written) ? targets.get(written) : written;
        if (written !== null && !(YAML.isScalar(k) && k.value === null)) continue;
        const shown = YAML.isAlias(written) ? `*${written.source}` : YAML.isScalar(written) ? (written.source ?? '') : '';
        found = { offset: written?.range?.[0] ?? map.range?.[0] ?? 0, key: keyPath([...ancestors, map], shown).replace(/\.$/, ''), written: shown };
        return YAML.visit.BREAK;
      }
      return undefined;
    },
  });
  return found;
}

/**
 * The first key or value holding bytes that were not UTF-8 (decoded to U+FFFD), if any: a
 * glob or path in a Latin-1 file would otherwise match or name something else, silently
 * (an exclude that excludes nothing). Such bytes in a comment harm nothing.
 */
function notUtf8(doc: YAML.Document): { offset: number; key: string } | undefined {
  let found: { offset: number; key: string } | undefined;
  YAML.visit(doc, {
    Scalar(_key, node, ancestors) {
      if (typeof node.value !== 'string' || !NOT_UTF8.test(node.value)) return undefined;
      found = { offset: node.range?.[0] ?? 0, key: keyPath([...ancestors, node], '').replace(/\.$/, '') };
      return YAML.visit.BREAK;
    },
  });
  return found;
}

/** More aliases than a config written by hand has; past it, the file is refused before they are resolved. */
const MAX_ALIASES = 1000;

type AliasTargets = Map<YAML.Alias, YAML.Node | undefined>;

/**
 * The node each alias names (the last one anchored by that name before it, as the library
 * resolves it), found in one walk of the document, or the offset of the alias past
 * MAX_ALIASES. The library's Alias.resolve(doc) walks the whole document once per alias, and
 * its toJS scans every anchor and alias before each one: a file of 200,000 `*a` (600 KB) took
 * hours of CPU in `validate` and at every start of `run`, the signal handlers unable to run.
 */
function aliasTargets(doc: YAML.Document): { targets: AliasTargets; tooMany?: number } {
  const targets: AliasTargets = new Map();
  const anchors = new Map<string, YAML.Node>();
  let tooMany: number | undefined;
  YAML.visit(doc, {
    Node(_key, node) {
      if (YAML.isAlias(node)) {
        if (targets.size === MAX_ALIASES) {
          tooMany = node.range?.[0] ?? 0;
          return YAML.visit.BREAK;
        }
        targets.set(node, anchors.get(node.source));
      } else if (node.anchor) {
        anchors.set(node.anchor, node);
      }
      return undefined;
    },
  });
  return tooMany === undefined ? { targets } : { targets, tooMany };
}

/** The uses of an anchor's content, times those of the aliases inside it, that toJS allows (its maxAliasCount). */
const MAX_ANCHOR_USES = 100;

/**
 * A `firstAlias` test that holds at the alias the library's toJS would refuse as "Excessive
 * alias count" (yaml's Alias.resolve, counted the same way and in the same order: each alias
 * adds a use of its anchor's content, weighted by the uses of the aliases inside it when
 * first met), so that the refusal can name its line and key.
 */
function aliasUses(targets: AliasTargets): (target: YAML.Node | undefined) => boolean {
  const uses = new Map<YAML.Node, { count: number; weight: number }>();
  const weight = (node: unknown): number => {
    if (YAML.isAlias(node)) {
      const u = uses.get(targets.get(node)!);
      return u ? u.count * u.weight : 0;
    }
    if (YAML.isCollection(node)) return node.items.reduce<number>((max, item) => Math.max(max, weight(item)), 0);
    if (YAML.isPair(node)) return Math.max(weight(node.key), weight(node.value));
    return 1;
  };
  return (target) => {
    if (target === undefined) return false;
    // The anchor itself is the first use.
    const u = uses.get(target) ?? { count: 1, weight: 0 };
    uses.set(target, u);
    u.count += 1;
    if (u.weight === 0) u.weight = weight(target);
    return u.count * u.weight > MAX_ANCHOR_USES;
  };
}

/**
 * The first alias (in document order) for which `matches` holds, given the node its anchor
 * names (undefined: no anchor before it) and the alias's ancestors: its offset, key path and anchor.
 */
function firstAlias(
  doc: YAML.Document,
  targets: AliasTargets,
  matches: (target: YAML.Node | undefined, ancestors: readonly unknown[]) => boolean,
): { offset: number; key: string; anchor: string } | undefined {
  let found: { offset: number; key: string; anchor: string } | undefined;
  YAML.visit(doc, {
    Alias(_key, node, ancestors) {
      if (!matches(targets.get(node), ancestors)) return undefined;
      found = { offset: node.range?.[0] ?? 0, key: keyPath([...ancestors, node], '').replace(/\.$/, ''), anchor: node.source };
      return YAML.visit.BREAK;
    },
  });
  return found;
}

/** YAML 1.1's type tags, left unresolved on purpose (resolveKnownTags off): their text is the value, as documented. */
const TEXT_AS_WRITTEN = new Set(['binary', 'timestamp', 'omap', 'set', 'pairs'].map((t) => `tag:yaml.org,2002:${t}`));

/**
 * The first node whose tag the library could not apply (its TAG_RESOLVE_FAILED warning), other
 * than YAML 1.1's type tags, if any: the warning's offset (the tag's) and the node's key path.
 * The tag itself is not returned: written unquoted, it is the start of the value (a password).
 */
function unappliedTag(doc: YAML.Document): { offset: number; key: string } | undefined {
  const failed = doc.warnings.filter((w) => w.code === 'TAG_RESOLVE_FAILED').map((w) => w.pos);
  if (failed.length === 0) return undefined;
  // Every tagged node, in document order (so by start): each failed tag is the one of the first
  // node that starts at or after its end. Found by binary search: linear in the file's size.
  const tagged: Array<{ start: number; node: YAML.Node; ancestors: readonly unknown[] }> = [];
  YAML.visit(doc, {
    Node(_key, node, ancestors) {
      if (!YAML.isAlias(node) && node.tag) tagged.push({ start: node.range?.[0] ?? 0, node, ancestors });
      return undefined;
    },
  });
  for (const [from, to] of [...failed].sort((a, b) => a[0] - b[0])) {
    let lo = 0;
    let hi = tagged.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (tagged[mid]!.start < to) lo = mid + 1;
      else hi = mid;
    }
    const hit = tagged[lo];
    if (hit === undefined || TEXT_AS_WRITTEN.has(hit.node.tag!)) continue;
    return { offset: from, key: keyPath([...hit.ancestors, hit.node], '').replace(/\.$/, '') };
  }
  return undefined;
}

/** `a.b[2].c` from the visitor's ancestors of a node (ending with the node) and its key. */
function keyPath(nodes: readonly unknown[], last: string): string {
  let out = '';
  nodes.forEach((node, i) => {
    if (YAML.isPair(node) && YAML.isScalar(node.key)) out += `${out ? '.' : ''}${String(node.key.value)}`;
    // A list's index is of the node below it: a list that is the last node (a tag on it) has none.
    if (YAML.isSeq(node) && i + 1 < nodes.length) out += `[${node.items.indexOf(nodes[i + 1])}]`;
  });
  return `${out ? `${out}.` : ''}${last}`;
}
