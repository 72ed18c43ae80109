// Which entries are the same anchor (the one rule for duplicates, used by the sequencer's
// in-flight requests and by the lookup index). An anchor is a claim about a file: the same
// digest under the same artifact label, scope and tenant says nothing new, so the log
// answers it with the entry it already holds. Every other type (document_verified, the
// control plane's decisions) records an event: each occurrence is its own entry.
import { sha256HexOfText } from './hash.js';

/** The fields an anchor's identity is made of (a request or a canonical entry). */
export interface AnchorFields {
  readonly type: string;
  readonly digest: string;
  readonly artifact?: string | undefined;
  readonly scope?: string | undefined;
  readonly tenant?: string | undefined;
}

/** The only entry type whose duplicates are merged. */
export const MERGED_TYPE = 'ledger_anchor';

/**
 * 64 hex characters naming an anchor's (digest, artifact, scope, tenant), or undefined for an
 * entry that is never merged. An absent label and an empty one differ (null versus "").
 */
export function anchorIdentity(e: AnchorFields): string | undefined {
  if (e.type !== MERGED_TYPE) return undefined;
  const fields = [e.digest.toLowerCase(), e.artifact ?? null, e.scope ?? null, e.tenant ?? null];
  return sha256HexOfText(JSON.stringify(fields));
}
