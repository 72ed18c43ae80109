// Byte helpers for the explorer: hex, base64 and comparisons are src/core/hash.ts's (they work
// without Buffer); 64-bit integers and display shortening are here.
export { bytesEqual, fromBase64, fromHex, toBase64, toHex } from '../core/hash.js';

export function u64be(n: number): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(n));
  return b;
}

/** First 16 hex characters and an ellipsis, for tables. */
export const short = (hex: string, n = 16): string => (hex.length > n ? `${hex.slice(0, n)}…` : hex);
