// Byte helpers for the explorer: hex, base64 and comparisons are src/core/hash.ts's (they work
// without Buffer); display shortening is here.
export { bytesEqual, fromBase64, fromHex, toBase64, toHex, u64be } from '../core/hash.js';

/** First 16 hex characters and an ellipsis, for tables. */
export const short = (hex: string, n = 16): string => (hex.length > n ? `${hex.slice(0, n)}…` : hex);
