// Row names shared by the LMDB and DynamoDB indexes for keys that are not already short.
import { utf8ToBytes } from '@noble/hashes/utils.js';
import { sha256, toHex } from '../core/hash.js';

/** A label's row name: 128 bits of its SHA-256 (a label may be 1,024 bytes; a key must stay small). */
export function labelKey(label: string): string {
  return toHex(sha256(utf8ToBytes(label))).slice(0, 32);
}
