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
    // Two generations of 4 × 2 sightings: key 0 is forgotten after 16 more.
    for (let k = 1; k <= 16; k++) cache.answer(k, FOREVER, body(String(k)));
    cache.answer(0, FOREVER, body('zero'));
    expect(cache.get(0, FOREVER)).toBeUndefined();
    for (const k of [20, 21, 22]) for (let i = 0; i < 2; i++) cache.answer(k, FOREVER, body(String(k)));
    expect([20, 21, 22].map((k) => cache.get(k, FOREVER)?.body.toString())).toEqual([undefined, '21', '22']);
  });
});
