// Cedar policy decisions (@cedar-policy/cedar-wasm). Policies, entities and an optional
// schema come from files in one directory:
//   *.cedar              policies (all files, in name order); `@id("…")` names a policy,
//                        else it is `<file>#<n>`
//   entities.json        Cedar JSON entities (optional; default none)
//   schema.cedarschema   Cedar schema (optional); when present, policies are validated
//                        against it on load and every request is validated against it
// The directory is watched (and polled as a fallback); a change is loaded, parsed and
// validated in full before it replaces the active set in one synchronous step, so a
// decision is always made by exactly one version, named by `policy_version` (pv_ + 16 hex
// of a SHA-256 over the file names and contents). A set that fails to load leaves the
// previous one active and is reported in the log and in `status()`.
import { watch, type FSWatcher } from 'node:fs';
import { createHash } from 'node:crypto';
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import * as cedar from '@cedar-policy/cedar-wasm/nodejs';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import { EntitySlicer } from './entities.js';
import { newUlid as ulid } from '../store/ids.js';
import { ApiError } from '../http/errors.js';

export interface EntityRef {
  readonly type: string;
  readonly id: string;
}

export interface PolicyRequest {
  readonly principal: EntityRef;
  readonly action: EntityRef;
  readonly resource: EntityRef;
  readonly context: Record<string, unknown>;
}

export interface PolicyDecision {
  readonly decision: 'allow' | 'deny';
  /** Ids of the policies that determined the decision (none: default deny). */
  readonly reasons: string[];
  /** Policies that failed to evaluate (they are skipped, as Cedar specifies). */
  readonly errors: string[];
  readonly policyVersion: string;
}

interface Snapshot {
  readonly version: string;
  readonly policyIds: string[];
  /** The entities, served to each decision as the slice it can reach. */
  readonly entities: EntitySlicer;
  readonly hasSchema: boolean;
  readonly loadedAt: string;
  /** Decisions already made by this version, by request (see evaluate()). */
  readonly decisions: LRUCache<string, PolicyDecision> | undefined;
}

/** Requests whose key is longer than this are always evaluated (a few large contexts must not crowd the cache). */
const MAX_DECISION_KEY = 2048;

// Node 20's V8 (11.3) aborts the whole process ("Fatal error … unreachable code" in
// Deoptimizer::DoComputeBuiltinContinuation) when a function into which TurboFan inlined a
// JS→Wasm call is lazily deoptimised during that call, which Cedar's wasm-bindgen glue
// makes likely under load (it builds the answer objects through JS callbacks). Seen about
// once every few 6-second benchmark runs at 64–256 connections; gone in 16 runs with the
// inlining off. Turning that one optimisation off costs nothing measurable here.
setFlagsFromString('--no-turbo-inline-js-wasm-calls');

const MAX_POLICY_BYTES = 4 * 1024 * 1024;
const DEFAULT_POLICY = `// Stele control-plane policies (Cedar). Every *.cedar file in this directory is loaded;
// edits are picked up while the service runs. With no policy, everything is denied.
//
// Example: services may lease documents of the "demo" compartment for up to an hour.
// permit (principal, action == Action::"lease", resource)
// when { context.compartment == "demo" && context.ttl_seconds <= 3600 };
`;

export class PolicyEngine {
  private snap!: Snapshot;
  /** Cedar keeps preparsed sets in wasm memory by id; one id per engine, replaced on reload. */
  private readonly psetId = `stele-${ulid()}`;
  private readonly schemaName = `stele-schema-${ulid()}`;
  private lastDigest = '';
  private lastError: string | undefined;
  private reloading: Promise<boolean> = Promise.resolve(false);
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private debounce: NodeJS.Timeout | undefined;

  private constructor(
    readonly dir: string,
    private readonly logger: Logger,
    private readonly decisionCacheSize: number,
  ) {}

  /**
   * Loads the directory (creating it with a starter file if it has no policy: `starter`, by
   * default the control plane's deny-all one) and watches it (and polls it every `pollMs`).
   * `decisionCacheSize`: decisions remembered per version (default 0, none).
   */
  static async open(
    dir: string,
    logger: Logger,
    o: { pollMs?: number; decisionCacheSize?: number; starter?: string } = {},
  ): Promise<PolicyEngine> {
    const pollMs = o.pollMs ?? 1000;
    const e = new PolicyEngine(dir, logger, o.decisionCacheSize ?? 0);
    await mkdir(dir, { recursive: true });
    const names = await readdir(dir);
    if (!names.some((n) => n.endsWith('.cedar')))
      await writeFile(join(dir, 'policies.cedar'), o.starter ?? DEFAULT_POLICY, { flag: 'wx' }).catch(() => undefined);
    if (!(await e.reload())) throw new Error(`policies in ${dir} could not be loaded: ${e.lastError}`);
    try {
      e.watcher = watch(dir, { persistent: false }, () => e.scheduleReload());
      e.watcher.on('error', () => undefined);
    } catch {
      // Polling alone still picks changes up.
    }
    e.timer = setInterval(() => void e.reload(), pollMs);
    e.timer.unref();
    return e;
  }

  get version(): string {
    return this.snap.version;
  }

  status(): {
    version: string;
    policies: string[];
    entities: number;
    schema: boolean;
    loaded_at: string;
    last_error?: string;
  } {
    return {
      version: this.snap.version,
      policies: this.snap.policyIds,
      entities: this.snap.entities.size,
      schema: this.snap.hasSchema,
      loaded_at: this.snap.loadedAt,
      ...(this.lastError ? { last_error: this.lastError } : {}),
    };
  }

  private scheduleReload(): void {
    if (this.debounce) clearTimeout(this.debounce);
    this.debounce = setTimeout(() => void this.reload(), 25);
    this.debounce.unref();
  }

  /** Re-reads the directory; true when the active set is valid (changed or not). Reloads run one at a time. */
  reload(): Promise<boolean> {
    this.reloading = this.reloading
      .then(() => this.load())
      .catch((e: unknown) => {
        this.lastError = (e as Error).message;
        this.logger.error(
          { dir: this.dir, err: this.lastError },
          'policy reload failed; the previous policy set stays active',
        );
        return false;
      });
    return this.reloading;
  }

  private async load(): Promise<boolean> {
    const { files, digest } = await readPolicyFiles(this.dir);
    if (digest === this.lastDigest) return true;
    const { policies, ests, entities, schema } = parsePolicyFiles(files);
    const pset: cedar.PolicySet = { staticPolicies: policies };
    checkPolicySet(pset, entities, schema);
    if (schema) {
      const s = cedar.preparseSchema(this.schemaName, schema);
      if (s.type !== 'success') throw new Error(`schema: ${messages(s.errors)}`);
    }
    const slicer = new EntitySlicer(entities, ests);
    // The swap: the preparsed set and the snapshot change together, synchronously, so no
    // decision sees one without the other (evaluate() is synchronous too).
    const ok = cedar.preparsePolicySet(this.psetId, pset);
    if (ok.type !== 'success') throw new Error(`policies: ${messages(ok.errors)}`);
    const version = `pv_${digest.slice(0, 16)}`;
    const previous = this.snap?.version;
    this.snap = {
      version,
      policyIds: Object.keys(policies),
      entities: slicer,
      hasSchema: schema !== undefined,
      loadedAt: new Date().toISOString(),
      decisions: this.decisionCacheSize > 0 ? new LRUCache({ max: this.decisionCacheSize }) : undefined,
    };
    this.lastDigest = digest;
    this.lastError = undefined;
    if (previous)
      this.logger.info({ from: previous, to: version, policies: this.snap.policyIds.length }, 'policy set reloaded');
    return true;
  }

  /**
   * Evaluates one request against the active set. Invalid requests throw a 400.
   *
   * A Cedar decision is a pure function of the policy set, the entities, the schema (one
   * version: a reload starts a new, empty cache with its snapshot) and the request: Cedar
   * has no clock, randomness or I/O. So a request seen before under the same version gets
   * the decision Cedar made then, without calling Cedar again. Only the evaluation is
   * reused: each request is still its own decision, with its own id, ledger entry and audit
   * event.
   */
  evaluate(req: PolicyRequest): PolicyDecision {
    const snap = this.snap;
    // The exact objects Cedar would be given (validated JSON from the request body), so
    // equal keys mean equal input; a key that differs only in member order merely misses.
    const key = snap.decisions
      ? JSON.stringify([
          req.principal.type,
          req.principal.id,
          req.action.type,
          req.action.id,
          req.resource.type,
          req.resource.id,
          req.context,
        ])
      : '';
    const cacheable = snap.decisions !== undefined && key.length <= MAX_DECISION_KEY;
    if (cacheable) {
      const hit = snap.decisions.get(key);
      if (hit) return hit;
    }
    const d = this.decide(snap, req);
    if (cacheable) snap.decisions.set(key, d);
    return d;
  }

  private decide(snap: Snapshot, req: PolicyRequest): PolicyDecision {
    const ans = cedar.statefulIsAuthorized({
      principal: req.principal,
      action: req.action,
      resource: req.resource,
      context: req.context as cedar.Context,
      preparsedPolicySetId: this.psetId,
      entities: snap.entities.slice(req.principal, req.action, req.resource, req.context),
      ...(snap.hasSchema ? { preparsedSchemaName: this.schemaName, validateRequest: true } : {}),
    });
    if (ans.type !== 'success')
      throw new ApiError(400, 'invalid_request', `the request cannot be evaluated: ${messages(ans.errors)}`);
    // Frozen: a remembered decision is shared by every request that gets it.
    return Object.freeze({
      decision: ans.response.decision,
      reasons: Object.freeze(ans.response.diagnostics.reason) as string[],
      errors: Object.freeze(
        ans.response.diagnostics.errors.map((e) => `${e.policyId}: ${e.error.message}`),
      ) as string[],
      policyVersion: snap.version,
    });
  }

  close(): void {
    this.watcher?.close();
    if (this.timer) clearInterval(this.timer);
    if (this.debounce) clearTimeout(this.debounce);
  }
}

function messages(errors: readonly cedar.DetailedError[]): string {
  return errors.map((e) => e.message).join('; ') || 'unknown error';
}

/** The policy directory's files (policies, entities, schema), bounded in size, and a digest of them all. */
async function readPolicyFiles(dir: string): Promise<{ files: [string, string][]; digest: string }> {
  const names = (await readdir(dir)).sort();
  const files: [string, string][] = [];
  let total = 0;
  for (const n of names) {
    if (!(n.endsWith('.cedar') || n === 'entities.json' || n === 'schema.cedarschema')) continue;
    const text = await readFile(join(dir, n), 'utf8');
    total += Buffer.byteLength(text);
    if (total > MAX_POLICY_BYTES) throw new Error(`policy directory exceeds ${MAX_POLICY_BYTES} bytes`);
    files.push([n, text]);
  }
  const h = createHash('sha256');
  for (const [n, t] of files) h.update(`${n}\0${Buffer.byteLength(t)}\0`).update(t);
  return { files, digest: h.digest('hex') };
}

/** Policies by id (its @id annotation, else file#index), their JSON forms, the entities and the schema. */
function parsePolicyFiles(files: readonly [string, string][]) {
  const policies: Record<string, string> = {};
  const ests: unknown[] = [];
  let entities: cedar.EntityJson[] = [];
  let schema: string | undefined;
  for (const [n, text] of files) {
    if (n === 'entities.json') entities = parseEntities(text);
    else if (n === 'schema.cedarschema') schema = text;
    else {
      const parts = cedar.policySetTextToParts(text);
      if (parts.type !== 'success') throw new Error(`${n}: ${messages(parts.errors)}`);
      if (parts.policy_templates.length > 0) throw new Error(`${n}: policy templates are not supported`);
      parts.policies.forEach((p, i) => {
        const json = cedar.policyToJson(p);
        if (json.type !== 'success') throw new Error(`${n}: ${messages(json.errors)}`);
        ests.push(json.json);
        const id = json.json.annotations?.id ?? `${n}#${i}`;
        if (Object.hasOwn(policies, id)) throw new Error(`${n}: duplicate policy id ${JSON.stringify(id)}`);
        policies[id] = p;
      });
    }
  }
  return { policies, ests, entities, schema };
}

function parseEntities(text: string): cedar.EntityJson[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new Error(`entities.json is not valid JSON: ${(e as Error).message}`);
  }
  if (!Array.isArray(parsed)) throw new Error('entities.json must be a JSON array of Cedar entities');
  return parsed as cedar.EntityJson[];
}

/** The set parses, the entities parse (against the schema if any), and the policies validate strictly against it. */
function checkPolicySet(pset: cedar.PolicySet, entities: cedar.EntityJson[], schema: string | undefined): void {
  const parsed = cedar.checkParsePolicySet(pset);
  if (parsed.type !== 'success') throw new Error(`policies: ${messages(parsed.errors)}`);
  const ents = cedar.checkParseEntities({ entities, ...(schema ? { schema } : {}) });
  if (ents.type !== 'success') throw new Error(`entities.json: ${messages(ents.errors)}`);
  if (!schema) return;
  const v = cedar.validate({ schema, policies: pset, validationSettings: { mode: 'strict' } });
  if (v.type !== 'success') throw new Error(`schema: ${messages(v.errors)}`);
  if (v.validationErrors.length > 0) {
    throw new Error(
      `policies do not validate against the schema: ${v.validationErrors.map((x) => `${x.policyId}: ${x.error.message}`).join('; ')}`,
    );
  }
}
