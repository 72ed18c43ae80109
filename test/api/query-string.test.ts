// parseQueryString (src/api/route-helpers.ts): its shortcut for one plain parameter must
// give what node:querystring gives, and everything else must go to node:querystring.
import { parse } from 'node:querystring';
import { describe, expect, it } from 'vitest';
import { parseQueryString } from '../../src/api/route-helpers.js';

const corpus = [
  '',
  'id=led_12_0123456789ab',
  'hash=00000000000000000000000000000000000000000000000000000000000f4240',
  'hash=ABCdef',
  'leaf=7',
  'id=',
  'id',
  '=x',
  'id==x',
  'Id=x',
  'id=a&id=b',
  'id=a&hash=b',
  'id=a%20b',
  'id=a+b',
  'id=a-b.c~d',
  'first=1&second=2',
  'a[]=1',
  '__proto__=x',
  'constructor=x',
  'hash=x#frag',
  'id=é',
  '&id=x',
  'id=x&',
];

describe('parseQueryString', () => {
  it('answers as node:querystring for every query of the corpus', () => {
    for (const qs of corpus) {
      const got = parseQueryString(qs);
      const want = parse(qs);
      expect({ ...got }).toEqual({ ...want });
      expect(Object.keys(got)).toEqual(Object.keys(want));
      // Nothing inherited, as node:querystring's object: no toString, no constructor.
      for (const name of ['toString', 'constructor', 'hasOwnProperty', '__proto__'])
        expect(name in got && !Object.hasOwn(got, name)).toBe(false);
    }
  });
});
