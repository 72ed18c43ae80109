// Client-side verification (docs/interface.md §4.3 rules 1–6): the rules and their report live in the pure
// core (src/core/verify/), shared with the explorer; this module binds them to the client's
// errors, so a network or I/O failure while fetching a consistency proof is reported as such
// (exit 3), not as a FAIL of the log.
import {
  type Outcome,
  type ProveConsistency,
  type StatusOutcome,
  checkConsistency as coreCheckConsistency,
  checkConsistencyWithPin as coreCheckConsistencyWithPin,
  checkCopyConsistency as coreCheckCopyConsistency,
} from '../core/verify/index.js';
import { hashFromHex } from '../core/hash.js';
import type { CheckpointView } from './api.js';
import { LogAnswerError, ClientError } from './errors.js';

export {
  type CheckedCheckpoint,
  type Check,
  type ConsistencyInput,
  type Cosigner,
  type KeyTrust,
  type Outcome,
  type ProveConsistency,
  type Quorum,
  type RuleName,
  type Status,
  type StatusOutcome,
  type Trust,
  NOT_WITNESSED,
  RULES,
  Report,
  checkCheckpoint,
  checkConsistencyProof,
  checkEntry,
  checkInclusion,
  policyQuorum,
} from '../core/verify/index.js';

/** Hashes as the API sends them (lowercase hex) as bytes. */
export const hashes = (hex: readonly string[]): Uint8Array[] => hex.map(hashFromHex);

/** A failure of the transport (not an answer of the log): the caller reports it, no verdict. */
export const isTransportError = (e: unknown): boolean =>
  e instanceof ClientError && (e.kind === 'network' || e.kind === 'io') && !(e instanceof LogAnswerError);

/** Rule 2 (src/core/verify/consistency.ts), with transport failures thrown to the caller. */
export function checkConsistency(
  older: { size: number; root: Uint8Array },
  newer: { size: number; root: Uint8Array },
  prove: ProveConsistency | null,
  label = 'pinned',
): Promise<Outcome & { proofLength?: number }> {
  return coreCheckConsistency(older, newer, prove, label, isTransportError);
}

/** Rule 2 for a checkpoint that may be older than the pin, with transport failures thrown. */
export function checkConsistencyWithPin(
  pin: { size: number; root: Uint8Array },
  cp: { size: number; root: Uint8Array },
  prove: ProveConsistency | null,
  offline: { reason: string; detail: string },
): Promise<Outcome | StatusOutcome> {
  return coreCheckConsistencyWithPin(pin, cp, prove, offline, isTransportError);
}

/**
 * Rule 2 for a copy of the log that may lag behind the pin: a proof to the pin that cannot
 * be had for want of the network leaves it "older than your pin", never a FAIL of the log.
 */
export function checkCopyConsistency(
  pin: { size: number; root: Uint8Array },
  cp: { size: number; root: Uint8Array },
  prove: ProveConsistency | null,
  proveToPin: ProveConsistency | null,
): Promise<Outcome | StatusOutcome> {
  return coreCheckCopyConsistency(pin, cp, prove, proveToPin, isTransportError, isTransportError);
}

/** A checkpoint as the client reads it: the API's JSON (with its unsigned fields) or a note. */
export interface CheckpointInput {
  readonly json?: CheckpointView;
  readonly note?: string;
}
