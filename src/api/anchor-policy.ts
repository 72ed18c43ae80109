// The anchor policy (docs/interface.md §1.7, §4.1 rule 2: in production the anchor route "validates the
// digest against policy"). Each anchor is one Cedar request, decided by the engine the
// control plane uses (src/policy/cedar.ts: the same files, hot reload, and a broken set
// leaves the previous one active):
//   principal  Token::"<token name>"            (entities.json may put tokens in groups)
//   action     Action::"<entry type>"           ledger_anchor | document_verified
//   resource   Scope::"<scope>"                 "" when the anchor names none
//   context    { token, tenant, scope, artifact, digest, type, anchors_this_minute }
//              strings ("" when absent) and the number of anchors this token had admitted
//              in the current minute before this one (a per-principal batch size).
// Cedar denies what no policy permits, and a `forbid` overrides every `permit`.
import type { Logger } from 'pino';
import type { AnchorRequest } from '../core/anchor.js';
import { PolicyEngine } from '../policy/cedar.js';
import type { AnchorClient, AnchorDecider } from './anchor-guard.js';

/** Written into an empty policy directory: admits what any valid token sends, as before policies. */
export const STARTER_ANCHOR_POLICY = `// Stele anchor policy (Cedar). In production mode every anchor is decided by the *.cedar
// files of this directory before it enters the log; edits are picked up while the server
// runs, and a file that fails to load leaves the previous policies active.
//
//   principal  Token::"<token name>"      action    Action::"ledger_anchor" | Action::"document_verified"
//   resource   Scope::"<scope>"           context   token, tenant, scope, artifact, digest, type
//                                                   (strings, "" when absent), anchors_this_minute
//
// This starter admits every anchor of every valid token: replace it with your rules (see
// the README, "Anchor policy").
@id("starter-any-token")
permit (principal, action, resource);
`;

const MINUTE_MS = 60_000;

/** Anchors admitted per token in the current minute (the policy's anchors_this_minute). */
class MinuteCounts {
  private minute = -1;
  private counts = new Map<string, number>();

  current(token: string, now: number): number {
    this.roll(now);
    return this.counts.get(token) ?? 0;
  }

  add(token: string, now: number): void {
    this.roll(now);
    this.counts.set(token, (this.counts.get(token) ?? 0) + 1);
  }

  private roll(now: number): void {
    const m = Math.floor(now / MINUTE_MS);
    if (m !== this.minute) {
      this.minute = m;
      this.counts = new Map();
    }
  }
}

export interface AnchorPolicy {
  readonly decide: AnchorDecider;
  readonly engine: PolicyEngine;
  close(): void;
}

/** Opens the policy directory (writing the starter policy into an empty one) and watches it. */
export async function openAnchorPolicy(
  dir: string,
  logger: Logger,
  o: { pollMs?: number; now?: () => number } = {},
): Promise<AnchorPolicy> {
  const engine = await PolicyEngine.open(dir, logger.child({ component: 'anchor-policy' }), {
    pollMs: o.pollMs ?? 1000,
    starter: STARTER_ANCHOR_POLICY,
  });
  const now = o.now ?? Date.now;
  const counts = new MinuteCounts();
  const decide = (who: AnchorClient, r: AnchorRequest) => {
    const t = now();
    const d = engine.evaluate({
      principal: { type: 'Token', id: who.client },
      action: { type: 'Action', id: r.type },
      resource: { type: 'Scope', id: r.scope ?? '' },
      context: {
        token: who.client,
        tenant: r.tenant ?? '',
        scope: r.scope ?? '',
        artifact: r.artifact ?? '',
        digest: r.digest,
        type: r.type,
        anchors_this_minute: counts.current(who.client, t),
      },
    });
    const allowed = d.decision === 'allow';
    if (allowed) counts.add(who.client, t);
    return { allowed, reasons: d.reasons, policyVersion: d.policyVersion };
  };
  return { decide, engine, close: () => engine.close() };
}
