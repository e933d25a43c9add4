import { describe, expect, it } from 'vitest';
import { braceAlternatives } from '../../src/globs.js';

describe('braceAlternatives', () => {
  it('expands brace lists as a shell does, nested ones too', () => {
    expect(braceAlternatives('**/{*,.*}')).toEqual(['**/*', '**/.*']);
    expect(braceAlternatives('a/{b,c{d,e}}/f')).toEqual(['a/b/f', 'a/cd/f', 'a/ce/f']);
    expect(braceAlternatives('{a,b}{c,d}')).toEqual(['ac', 'ad', 'bc', 'bd']);
    expect(braceAlternatives('*.{txt,}')).toEqual(['*.txt', '*.']);
  });

  it('leaves to picomatch what is no list: ranges, literals, escaped or bracketed braces', () => {
    for (const g of ['x{1..3}', '{a}', 'a\\{b,c}', '[{,]x', '**/*.txt', '{a,b']) expect(braceAlternatives(g)).toEqual([g]);
    expect(braceAlternatives('{a{b,c}}')).toEqual(['{ab}', '{ac}']);
    expect(braceAlternatives('{a\\,b,c}')).toEqual(['a\\,b', 'c']);
  });

  it('matches a runaway glob as it is', () => {
    const g = '{a,b}'.repeat(9); // 512 alternatives
    expect(braceAlternatives(g)).toEqual([g]);
  });
});
