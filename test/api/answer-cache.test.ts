// The kept answers of the hot reads (src/api/answer-cache.ts): kept on a key's second
// sighting, served only in their own generation, in buffers of their own.
import { describe, expect, it } from 'vitest';
import { AnswerCache, FOREVER } from '../../src/api/answer-cache.js';

const body = (s: string) => ({ body: Buffer.from(s) });

describe('AnswerCache', () => {
  it('keeps an answer only when its key is asked for a second time', () => {
    const cache = new AnswerCache<number, { body: Buffer }>(4);
    cache.answer(1, FOREVER, body('one'));
    expect(cache.get(1, FOREVER)).toBeUndefined();
    cache.answer(1, FOREVER, body('one'));
    expect(cache.get(1, FOREVER)?.body.toString()).toBe('one');
  });

  it('serves an answer only in the generation it was made in', () => {
    const cache = new AnswerCache<string, { body: Buffer }>(4);
    const [before, after] = [{}, {}];
    for (let i = 0; i < 2; i++) cache.answer('k', before, body('old'));
    expect(cache.get('k', before)?.body.toString()).toBe('old');
    expect(cache.get('k', after)).toBeUndefined();
    // The key was seen: its answer in the new generation is kept at once.
    cache.answer('k', after, body('new'));
    expect(cache.get('k', after)?.body.toString()).toBe('new');
    expect(cache.get('k', before)).toBeUndefined();
  });

  it('keeps a copy that shares no buffer with the answer sent', () => {
    const cache = new AnswerCache<number, { body: Buffer }>(4);
    const sent = Buffer.from('abc');
    for (let i = 0; i < 2; i++) cache.answer(7, FOREVER, { body: sent });
    sent.write('xyz');
    const kept = cache.get(7, FOREVER)!.body;
    expect(kept.toString()).toBe('abc');
    expect(kept.buffer.byteLength).toBe(3);
  });

  it('keeps what its keep function makes of an answer, and sends the answer itself the first time', () => {
    const made: string[] = [];
    const cache = new AnswerCache<number, { body: Buffer; note: string }>(4, (v) => {
      made.push(v.note);
      return { body: Buffer.from(v.body), note: `kept ${v.note}` };
    });
    const first = { body: Buffer.from('a'), note: 'a' };
    expect(cache.answer(3, FOREVER, first)).toBe(first);
    expect(made).toEqual([]);
    cache.answer(3, FOREVER, { body: Buffer.from('a'), note: 'again' });
    expect(made).toEqual(['again']);
    expect(cache.get(3, FOREVER)?.note).toBe('kept again');
  });

  it('forgets sightings beyond its bound and answers beyond its size', () => {
    const cache = new AnswerCache<number, { body: Buffer }>(2);
    cache.answer(0, FOREVER, body('zero'));
    // 8 slots of sightings (4 × 2): a thousand other keys crowd key 0 out of its slot.
    for (let k = 1; k <= 1000; k++) cache.answer(k, FOREVER, body(String(k)));
    cache.answer(0, FOREVER, body('zero'));
    expect(cache.get(0, FOREVER)).toBeUndefined();
    // …and a third sighting keeps it.
    cache.answer(0, FOREVER, body('zero'));
    expect(cache.get(0, FOREVER)?.body.toString()).toBe('zero');
    for (const k of [20, 21, 22]) for (let i = 0; i < 2; i++) cache.answer(k, FOREVER, body(String(k)));
    expect([20, 21, 22].map((k) => cache.get(k, FOREVER)?.body.toString())).toEqual([undefined, '21', '22']);
  });

  it('tells keys apart that share their low bits, a string key or a leaf beyond 2^32', () => {
    const cache = new AnswerCache<number | string, { body: Buffer }>(64);
    const keys = [7, 7 + 2 ** 32, 7 + 2 ** 40, 2 ** 52 + 1, '12/345', '123/45', '', 'é/𝄞'];
    for (const k of keys) cache.answer(k, FOREVER, body(String(k)));
    // One sighting each: none is kept, so none was taken for another.
    for (const k of keys) expect(cache.get(k, FOREVER)).toBeUndefined();
    for (const k of keys) cache.answer(k, FOREVER, body(String(k)));
    expect(keys.map((k) => cache.get(k, FOREVER)?.body.toString())).toEqual(keys.map(String));
  });
});
