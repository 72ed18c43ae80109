// Anchor requests: validation of what a client may submit (docs/design.md §1.5) and the
// canonical entry the sequencer builds from it.
import { type CanonicalEntry, artifactId } from './entry.js';
import { LABEL_MAX_BYTES, type LabelField, checkLabel } from './labels.js';
import { isHash64 } from './hash.js';

export const MAX_ARTIFACT_BYTES = LABEL_MAX_BYTES.artifact;
export const MAX_SCOPE_BYTES = LABEL_MAX_BYTES.scope;
export const MAX_TENANT_BYTES = LABEL_MAX_BYTES.tenant;

/** A validated request to append one entry. */
export interface AnchorRequest {
  readonly type: string;
  readonly result: string;
  /** 64 lowercase hex characters. */
  readonly digest: string;
  readonly artifact?: string;
  readonly scope?: string;
  readonly tenant?: string;
}

export class ValidationError extends Error {
  override name = 'ValidationError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** A label by the one rule of src/core/labels.ts, in its NFC form; undefined when absent. */
function optionalLabel(body: Record<string, unknown>, field: LabelField): string | undefined {
  const v = body[field];
  if (v === undefined) return undefined;
  const checked = checkLabel(field, v);
  if (!checked.ok) throw new ValidationError(`invalid_${field}`, checked.reason);
  return checked.value;
}

/** Entry types a client may append through the anchor route, with the result recorded. */
export const CLIENT_ENTRY_TYPES: Readonly<Record<string, string>> = {
  ledger_anchor: 'Anchored',
  document_verified: 'Verified',
};

/**
 * Validates the body of POST /api/ledger/anchor: {digest, artifact?, scope?, tenant?, type?,
 * allowDuplicate?} (the last read by parseAnchorOptions).
 * `type` defaults to ledger_anchor; `stele verify --anchor` sends document_verified. The
 * tenant is the one the client names: whether it may be recorded is the route's decision.
 */
export function parseAnchorBody(body: unknown): AnchorRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ValidationError('invalid_body', 'request body must be a JSON object');
  }
  const b = body as Record<string, unknown>;
  const unknown = Object.keys(b).filter(
    (k) => !['digest', 'artifact', 'scope', 'tenant', 'type', ...ANCHOR_OPTIONS].includes(k),
  );
  if (unknown.length > 0) throw new ValidationError('unknown_field', `unknown field ${JSON.stringify(unknown[0])}`);
  if (b.digest === undefined) throw new ValidationError('missing_digest', 'digest is required');
  if (!isHash64(b.digest))
    throw new ValidationError('invalid_digest', 'digest must be 64 hexadecimal characters (SHA-256)');
  const artifact = optionalLabel(b, 'artifact');
  const scope = optionalLabel(b, 'scope');
  const tenant = optionalLabel(b, 'tenant');
  const type = b.type ?? 'ledger_anchor';
  const result =
    typeof type === 'string' && Object.hasOwn(CLIENT_ENTRY_TYPES, type) ? CLIENT_ENTRY_TYPES[type] : undefined;
  if (result === undefined) {
    throw new ValidationError('invalid_type', `type must be one of ${Object.keys(CLIENT_ENTRY_TYPES).join(', ')}`);
  }
  return anchorRequest(type as string, result, b.digest, { artifact, scope, tenant });
}

/** Body fields that say how to anchor, not what: they are not recorded. */
const ANCHOR_OPTIONS = ['allowDuplicate'];

export interface AnchorOptions {
  /** Append a new entry even if an identical anchor is in the log (src/core/duplicates.ts). */
  readonly allowDuplicate: boolean;
}

/** The options of an anchor body parseAnchorBody accepted: `allowDuplicate` (boolean, default false). */
export function parseAnchorOptions(body: unknown): AnchorOptions {
  const v = (body as Record<string, unknown>).allowDuplicate ?? false;
  if (typeof v !== 'boolean')
    throw new ValidationError('invalid_allowDuplicate', 'allowDuplicate must be true or false');
  return { allowDuplicate: v };
}

/** Builds a request of any entry type (anchors, document_verified, control-plane decisions). */
export function anchorRequest(
  type: string,
  result: string,
  digest: string,
  labels: { artifact?: string | undefined; scope?: string | undefined; tenant?: string | undefined } = {},
): AnchorRequest {
  if (!isHash64(digest))
    throw new ValidationError('invalid_digest', 'digest must be 64 hexadecimal characters (SHA-256)');
  if (labels.tenant !== undefined) {
    const checked = checkLabel('tenant', labels.tenant);
    if (!checked.ok || checked.value !== labels.tenant)
      throw new ValidationError('invalid_tenant', checked.ok ? 'tenant must be in NFC' : checked.reason);
  }
  const req: { -readonly [K in keyof AnchorRequest]: AnchorRequest[K] } = {
    type,
    result,
    digest: digest.toLowerCase(),
  };
  if (labels.artifact !== undefined) req.artifact = labels.artifact;
  if (labels.scope !== undefined) req.scope = labels.scope;
  if (labels.tenant !== undefined) req.tenant = labels.tenant;
  return req;
}

/**
 * The canonical entry for a request integrated at `timestamp`; absent fields are omitted.
 * `artId` is the request's artifact id when already computed (it is a function of the request).
 */
export function buildEntry(req: AnchorRequest, timestamp: string, artId?: string): CanonicalEntry {
  const e: CanonicalEntry = { v: 1, type: req.type, result: req.result, digest: req.digest, timestamp };
  if (req.artifact !== undefined) {
    e.artifact = req.artifact;
    e.artifactId = artId ?? artifactId(req.artifact, req.scope);
  }
  if (req.scope !== undefined) e.scope = req.scope;
  if (req.tenant !== undefined) e.tenant = req.tenant;
  return e;
}
