// A token that does not answer fails the caller within the bound (the sequencer's batch then
// fails before anything is staged), and the late call is still awaited, so its session is
// closed only once the module is done with it.
import { describe, expect, it } from 'vitest';
import { TimedOut, bounded } from '../../src/pkcs11/token.js';

describe('bounded token calls', () => {
  it('passes an answer through, and turns silence into TimedOut carrying the late call', async () => {
    expect(await bounded(Promise.resolve(7), 1_000, 'fast')).toBe(7);
    let finish!: (v: number) => void;
    const late = new Promise<number>((r) => (finish = r));
    const err = await bounded(late, 30, 'token "t" (sign)').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TimedOut);
    expect((err as TimedOut).kind).toBe('device');
    expect((err as Error).message).toBe('token "t" (sign) did not answer within 30 ms');
    let settled = false;
    void (err as TimedOut).settled.then(() => (settled = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(settled).toBe(false);
    finish(1);
    await (err as TimedOut).settled;
    expect(settled).toBe(true);
  });
});
