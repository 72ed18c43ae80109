// What the bucket itself enforces about the log's objects (docs/design.md §1.2, invariant 3), for every
// principal — the sequencer's task role, the explorer's deployment, an account administrator
// (short of rewriting the bucket policy, which CloudTrail records):
//   - nothing under tile/ (hash tiles, entry and record bundles, full or partial) is written
//     without `If-None-Match: *`, so a PUT can only create, never overwrite: S3 answers 412
//     to a create over an existing object (the store then compares bytes, src/store/s3.ts);
//   - nothing under the public prefix is deleted except partial tiles (`tile/…/<N>.p/<W>`,
//     swept once their full tile exists: docs/design.md §1.5), so a full tile or bundle, once
//     written, stays the current version; no version of a public object is ever deleted
//     by a request (noncurrent versions go by the lifecycle rules only).
// The staging prefix (staged batches, the bucket lock, the start-up probe) stays writable.
// Object Lock is not used: its default retention would apply to every version of the hot
// keys (checkpoint, checkpoint.json, private/lock.json: up to one version a second), and the
// services cannot set a per-object retention; README "Immutability" explains the choice.
import * as iam from 'aws-cdk-lib/aws-iam';

/** The condition key S3 sets from a PUT's If-None-Match header (absent without the header). */
export const IF_NONE_MATCH_KEY = 's3:if-none-match';

/** Object keys (relative to the bucket) that are rewritten up to once a second. */
export function hotKeys(publicPrefix: string, stagingPrefix: string): string[] {
  return [`${publicPrefix}checkpoint`, `${publicPrefix}checkpoint.json`, `${stagingPrefix}lock.json`];
}

/** Noncurrent versions of a hot key kept beyond the first day (S3 allows at most 100). */
export const HOT_KEY_VERSIONS = 100;

/**
 * The Deny statements of the bucket policy. `objectArn(pattern)` names objects of the bucket
 * (the bucket's arnForObjects); the patterns use S3's `*`, which also matches `/`.
 */
export function immutabilityStatements(
  objectArn: (pattern: string) => string,
  publicPrefix: string,
  stagingPrefix: string,
): iam.PolicyStatement[] {
  const anyone = [new iam.AnyPrincipal()];
  return [
    new iam.PolicyStatement({
      sid: 'TilesAreCreatedNeverOverwritten',
      effect: iam.Effect.DENY,
      principals: anyone,
      actions: ['s3:PutObject'],
      resources: [objectArn(`${publicPrefix}tile/*`)],
      conditions: { Null: { [IF_NONE_MATCH_KEY]: 'true' } },
    }),
    new iam.PolicyStatement({
      sid: 'OnlyPartialTilesAreDeleted',
      effect: iam.Effect.DENY,
      principals: anyone,
      actions: ['s3:DeleteObject'],
      notResources: [objectArn(`${publicPrefix}tile/*.p/*`), objectArn(`${stagingPrefix}*`)],
    }),
    new iam.PolicyStatement({
      sid: 'PublishedVersionsAreNeverDeleted',
      effect: iam.Effect.DENY,
      principals: anyone,
      actions: ['s3:DeleteObjectVersion'],
      resources: [objectArn(`${publicPrefix}*`)],
    }),
  ];
}
