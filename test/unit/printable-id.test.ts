import { describe, expect, it } from 'vitest';
import { fromPrintableId, printableId } from '../../src/commands/status.js';

describe('printableId: ids in text listings can be pasted back into dead-letter retry', () => {
  it('prints plain and escaped ids as stored', () => {
    expect(printableId('dir/item-1.scc')).toBe('dir/item-1.scc');
    expect(printableId('back\\\\slash')).toBe('back\\\\slash');
    expect(printableId('caf\\xe9.txt')).toBe('caf\\xe9.txt');
    expect(printableId('日本.scc')).toBe('日本.scc');
  });

  it('quotes ids a shell or a line would mangle: spaces, quotes, control characters', () => {
    expect(printableId('a b.txt')).toBe('"a b.txt"');
    expect(printableId('new\nline')).toBe('"new\\nline"');
    expect(printableId('it\'s')).toBe('"it\'s"');
    expect(printableId('tab\there')).toBe('"tab\\there"');
  });
});

describe('printableId: no raw control character reaches the terminal, and the printed form reads back', () => {
  it.each(['del\u007f.txt', 'csi\u009b31m.txt', 'nel\u0085.txt', 'esc\u001b[2J.txt'])('%j is quoted with the control character escaped', (id) => {
    const shown = printableId(id);
    expect(shown).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
    expect(shown.startsWith('"')).toBe(true);
    expect(fromPrintableId(shown)).toBe(id);
  });
});

describe('printableId: an id that starts with a dash is never read as an option', () => {
  it.each(['--all', '-draft.scc', '-', '--json', '-c'])('%j is printed with ./ before it and reads back', (id) => {
    expect(printableId(id)).toBe(`./${id}`);
    expect(fromPrintableId(`./${id}`)).toBe(id);
  });

  it('leaves ./ alone where the listing would not have printed it (an id never starts with ./)', () => {
    expect(fromPrintableId('./a.scc')).toBe('./a.scc');
    expect(fromPrintableId('-a.scc')).toBe('-a.scc');
    expect(printableId('a-b/-c.scc')).toBe('a-b/-c.scc');
    // Quoted, it is the id with its quotes (as list --json gives it): the listing prints -x as ./-x.
    expect(fromPrintableId('"-x"')).toBe('"-x"');
    expect(fromPrintableId('"-a b"')).toBe('-a b');
  });
});

describe('printableId: a blank other than the space never passes for one', () => {
  it.each(['a\u00a0b', 'a\u3000b', 'a\u2003b', 'a\u2028b', 'a\u202fb'])('%j is quoted with that blank escaped, never shown as "a b"', (id) => {
    // Before: quoted (a blank) but raw, `"a<NBSP>b"` read as `"a b"`, another id.
    const shown = printableId(id);
    expect(shown).toMatch(/^"a\\u[0-9a-f]{4}b"$/);
    expect(shown).not.toBe(printableId('a b'));
    expect(fromPrintableId(shown)).toBe(id);
  });
});

describe('printableId: a name in another normal form than NFC never passes for its NFC twin', () => {
  it.each(['cafe\u0301.scc', '\u212b.txt', 'nfd-del\u007fe\u0301', '\u1112\u1161\u11ab.scc', 'e\u0301 \u{1d15e}.scc'])('%j is quoted with all but printable ASCII escaped, and reads back', (id) => {
    const shown = printableId(id);
    expect(shown).toMatch(/^"[\u0020-\u007e]*"$/);
    expect(shown).not.toBe(printableId(id.normalize('NFC')));
    expect(fromPrintableId(shown)).toBe(id);
  });

  it('the NFC form is printed as before', () => {
    expect(printableId('caf\u00e9.scc')).toBe('caf\u00e9.scc');
    expect(printableId('\u1112\u1161\u11ab'.normalize('NFC'))).toBe('\ud55c');
  });
});
