// `stele/verify`: Stele's pure verification core as one entry point, for Node and browsers
// (no `node:*` imports, no Buffer). It holds the C2SP and RFC 6962 layer (SHA-256 and
// Merkle hashing, inclusion and consistency proofs, tlog-tiles paths and hash tiles, signed
// notes, checkpoints and cosignatures, tlog-proof and tlog-policy) and Stele's own formats
// (canonical entries, the entry_hash chain, entry and artifact ids, bundle framing, anchor
// request rules). The server, the CLI and the explorer use these same modules.
export * from './hash.js';
export * from './merkle.js';
export * from './subtree.js';
export * from './tiles.js';
export * from './bundle.js';
export * from './note.js';
export * from './checkpoint.js';
export * from './tlog-proof.js';
export * from './tlog-policy.js';
export * from './entry.js';
export * from './anchor.js';
export * from './verify/index.js';
