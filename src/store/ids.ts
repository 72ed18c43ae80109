// Identifiers (dec_, lse_, auf_, kek_ + a ULID). `ulid()` without a generator looks up the
// platform's random source on every call, which shows up in profiles at thousands of ids
// per second; this one draws from a buffered node:crypto pool instead (still fully random,
// not the monotonic variant, whose ids within a millisecond are predictable increments).
import { randomBytes } from 'node:crypto';
import { ulid } from 'ulid';

let pool = Buffer.alloc(0);
let pos = 0;

/** A uniform random number in [0, 1) from the CSPRNG. */
function prng(): number {
  if (pos + 4 > pool.length) {
    pool = randomBytes(4096);
    pos = 0;
  }
  const v = pool.readUInt32BE(pos) / 0x1_0000_0000;
  pos += 4;
  return v;
}

export const newUlid = (): string => ulid(undefined, prng);
