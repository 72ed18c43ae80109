// `stele hammer`: load and correctness for any Stele deployment. Writers POST anchors (a
// share of them re-sending a digest already anchored) at a target rate or as fast as their
// number allows; readers poll the log's `checkpoint` and read only tlog-tiles objects to
// verify, against one shared view (./view.ts), that every checkpoint seen is signed and
// consistent with every other and that every acknowledged anchor is included. 429 and 503
// are the log pushing back (counted, then retried after Retry-After), not errors.
import { randomBytes } from 'node:crypto';
import { hashFromHex, isHash64 } from '../core/hash.js';
import { type NoteVerifier, SIG_ED25519, parseVkey } from '../core/note.js';
import { LogReader } from '../read/reader.js';
import { HttpObjectReader } from '../client/objects.js';
import { JsonPoster, type PostAnswer } from './poster.js';
import { SharedView } from './view.js';
import { setTimeout as sleep } from 'node:timers/promises';

export interface HammerOptions {
  /** The log's API base URL (POST /api/ledger/anchor). */
  readonly url: string;
  /** Where its tlog-tiles objects are (default: `url`). */
  readonly tiles?: string;
  /** The log's note verifier key; default: fetched once from `url`/api/ledger/key (trust on first use). */
  readonly vkey?: string;
  /** Bearer token for the anchor route (production mode). */
  readonly token?: string;
  /** Concurrent writers, each waiting for its answer before the next POST. */
  readonly writers: number;
  /** Anchors per second across all writers; unset: as fast as the writers go. */
  readonly rate?: number;
  /** Share (0..1) of POSTs that re-send a digest already anchored. */
  readonly duplicateShare: number;
  readonly readers: number;
  /** How long writers run, in ms; readers then finish verifying (up to `settleMs`). */
  readonly durationMs: number;
  readonly settleMs?: number;
  /** Goal: at least this many acknowledged anchors per second. */
  readonly writeGoal?: number;
  /** Called about once a second while the run lasts. */
  readonly onProgress?: (p: HammerProgress) => void;
}

export interface HammerProgress {
  readonly elapsedS: number;
  readonly treeSize: number;
  readonly anchors: number;
  readonly anchorsPerS: number;
  readonly pushback: number;
  readonly verified: number;
  readonly failures: number;
}

export interface LatencySummary {
  readonly min: number;
  readonly avg: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

export interface HammerReport {
  readonly url: string;
  readonly tiles: string;
  readonly durationS: number;
  readonly tree: { readonly startSize: number; readonly endSize: number; readonly growth: number };
  readonly writes: {
    readonly acknowledged: number;
    readonly duplicates: number;
    readonly perSecond: number;
    /** Time from POST to its answer: the anchor integrated and published (ms). */
    readonly integrateMs: LatencySummary | null;
    readonly pushback: { readonly 429: number; readonly 503: number };
    readonly errors: number;
  };
  readonly reads: {
    readonly checkpoints: number;
    readonly consistencyProofs: number;
    readonly inclusionProofs: number;
    readonly spotChecks: number;
    readonly errors: number;
    /** Acknowledged anchors not proved included by the end. */
    readonly unverified: number;
  };
  readonly verificationFailures: number;
  /** The first few failures and errors, one line each. */
  readonly problems: readonly string[];
  readonly goals: { readonly writeGoal?: { readonly target: number; readonly met: boolean } };
  /** No verification failure, no error, every anchor verified, every goal met. */
  readonly ok: boolean;
}

/** A hammer that cannot start (bad URL, no key): the CLI reports it as a usage or network error. */
export class HammerSetupError extends Error {
  override name = 'HammerSetupError';
}

const KEPT_PROBLEMS = 20;
const READ_PAUSE_MS = 100;
const MAX_RETRY_AFTER_MS = 2000;
const withSlash = (u: string) => (u.endsWith('/') ? u : `${u}/`);

/** The anchor answer's fields the hammer uses (docs/interface.md §2.5), checked before use. */
interface AnchorAnswer {
  leafIndex: number;
  entryHash: Uint8Array;
  note: string;
}

function parseAnchorAnswer(body: unknown): AnchorAnswer | null {
  const b = body as {
    leafIndex?: unknown;
    entry?: { proof?: { entryHash?: unknown } };
    checkpoint?: { note?: unknown };
  } | null;
  const hash = b?.entry?.proof?.entryHash;
  if (
    !b ||
    !Number.isSafeInteger(b.leafIndex) ||
    typeof hash !== 'string' ||
    !isHash64(hash) ||
    typeof b.checkpoint?.note !== 'string'
  )
    return null;
  return { leafIndex: b.leafIndex as number, entryHash: hashFromHex(hash), note: b.checkpoint.note };
}

async function logVerifier(o: HammerOptions): Promise<NoteVerifier> {
  let vkey = o.vkey;
  if (vkey === undefined) {
    const res = await fetch(new URL('api/ledger/key', withSlash(o.url)));
    if (!res.ok)
      throw new HammerSetupError(`GET ${o.url}/api/ledger/key: HTTP ${res.status} (give the log's key with --vkey)`);
    vkey = ((await res.json()) as { vkey?: string }).vkey;
    if (typeof vkey !== 'string')
      throw new HammerSetupError(`${o.url}/api/ledger/key has no vkey (give the log's key with --vkey)`);
  }
  let v: NoteVerifier;
  try {
    v = parseVkey(vkey);
  } catch (e) {
    throw new HammerSetupError(`the log's vkey: ${(e as Error).message}`);
  }
  if (v.type !== SIG_ED25519) throw new HammerSetupError('the vkey is not an Ed25519 log key');
  return v;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function summarise(ms: number[]): LatencySummary | null {
  if (ms.length === 0) return null;
  const s = Float64Array.from(ms).sort();
  const at = (p: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
  const round = (x: number) => Math.round(x * 10) / 10;
  return {
    min: round(s[0]!),
    avg: round(ms.reduce((a, b) => a + b, 0) / ms.length),
    p50: round(at(50)),
    p99: round(at(99)),
    max: round(s[s.length - 1]!),
  };
}

export async function runHammer(o: HammerOptions): Promise<HammerReport> {
  const run = new HammerRun(o, await logVerifier(o));
  const first = await run.fetchCheckpoint();
  const startHead = first ? await run.view.observe(first, 'checkpoint') : null;
  if (!startHead)
    throw new HammerSetupError(
      `cannot read a verified checkpoint from ${run.checkpointUrl}: ${run.problems[0] ?? run.view.failures[0] ?? 'unknown'}`,
    );
  const ticker = setInterval(() => run.progress(), 1000);
  const readers = Array.from({ length: o.readers }, () => run.reader());
  const writers = Array.from({ length: o.writers }, () => run.writer());
  await sleep(o.durationMs);
  run.writing = false;
  await Promise.all(writers);
  run.poster.close();
  const writeSeconds = (performance.now() - run.started) / 1000;
  // Readers carry on until every acknowledged anchor is proved included (or the settle time runs out).
  const settleUntil = performance.now() + (o.settleMs ?? 10_000);
  while (run.view.unverified > 0 && performance.now() < settleUntil) await sleep(READ_PAUSE_MS);
  run.reading = false;
  await Promise.all(readers);
  // One last look, so the anchors the readers had not reached are proved against the latest checkpoint.
  const last = await run.fetchCheckpoint();
  if (last) await run.view.observe(last, 'checkpoint');
  clearInterval(ticker);
  run.progress();
  return run.report(startHead.size, writeSeconds);
}

/** One hammer run's shared state: the view every reader and writer feeds, and the counts. */
class HammerRun {
  readonly view: SharedView;
  readonly poster: JsonPoster;
  readonly checkpointUrl: string;
  readonly problems: string[] = [];
  readonly started = performance.now();
  writing = true;
  reading = true;
  private readonly tilesBase: string;
  private readonly anchorUrl: string;
  private readonly authorization: Record<string, string>;
  private readonly latencies: number[] = [];
  private readonly anchored: string[] = [];
  private duplicates = 0;
  private writeErrors = 0;
  private readErrors = 0;
  private readonly pushback = { 429: 0, 503: 0 };
  private sent = 0;
  // A fresh digest per anchor: this run's random prefix and a counter (unique without a
  // random draw per anchor, which was a twentieth of the hammer's CPU).
  private readonly runPrefix = randomBytes(24).toString('hex');
  private fresh = 0;

  constructor(
    private readonly o: HammerOptions,
    verifier: NoteVerifier,
  ) {
    this.tilesBase = o.tiles ?? o.url;
    const objects = new HttpObjectReader(this.tilesBase, { attempts: 1 });
    this.view = new SharedView(new LogReader(objects, { unverified: true, cacheBytes: 64 * 1024 * 1024 }), verifier);
    this.anchorUrl = new URL('api/ledger/anchor', withSlash(o.url)).toString();
    this.poster = new JsonPoster(this.anchorUrl, o.writers);
    this.authorization = o.token ? { authorization: `Bearer ${o.token}` } : {};
    this.checkpointUrl = new URL('checkpoint', objects.base).toString();
  }

  private problem(msg: string): void {
    if (this.problems.length < KEPT_PROBLEMS) this.problems.push(msg);
  }

  async fetchCheckpoint(): Promise<string | null> {
    try {
      const res = await fetch(this.checkpointUrl, { headers: { 'Cache-Control': 'no-cache' } });
      if (res.status === 429 || res.status === 503) return null;
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      return await res.text();
    } catch (e) {
      this.readErrors++;
      this.problem(`GET ${this.checkpointUrl}: ${(e as Error).message}`);
      return null;
    }
  }

  private freshDigest(): string {
    return this.runPrefix + (this.fresh++).toString(16).padStart(16, '0');
  }

  /** Waits for the next slot of the target rate (shared by every writer). */
  private async pace(): Promise<void> {
    if (!this.o.rate) return;
    const due = this.started + (this.sent++ / this.o.rate) * 1000;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
  }

  async writer(): Promise<void> {
    while (this.writing) {
      await this.pace();
      if (!this.writing) break;
      await this.anchorOne();
    }
  }

  /** One POST: a fresh digest, or (a share of the time) one already anchored. */
  private async anchorOne(): Promise<void> {
    const { anchored } = this;
    const duplicate = anchored.length > 0 && Math.random() < this.o.duplicateShare;
    const digest = duplicate ? anchored[Math.floor(Math.random() * anchored.length)]! : this.freshDigest();
    const t0 = performance.now();
    let res: PostAnswer;
    try {
      res = await this.poster.post(JSON.stringify({ digest }), this.authorization);
    } catch (e) {
      this.writeErrors++;
      this.problem(`POST ${this.anchorUrl}: ${(e as Error).message}`);
      await sleep(READ_PAUSE_MS);
      return;
    }
    if (res.status === 429 || res.status === 503) {
      this.pushback[res.status]++;
      await sleep(res.retryAfter !== undefined ? Math.min(res.retryAfter * 1000, MAX_RETRY_AFTER_MS) : READ_PAUSE_MS);
      return;
    }
    const body = parseJson(res.body);
    // A re-sent digest is the same anchor: the log answers it with the existing entry (200).
    const existing = res.status === 200 && (duplicate || res.resent);
    const answer = res.status === 201 || existing ? parseAnchorAnswer(body) : null;
    if (!answer) {
      this.writeErrors++;
      this.problem(`POST ${this.anchorUrl}: HTTP ${res.status} ${res.body.slice(0, 200)}`);
      return;
    }
    this.latencies.push(performance.now() - t0);
    if (duplicate) this.duplicates++;
    else anchored.push(digest);
    this.view.expect(answer.leafIndex, answer.entryHash);
    // The answer's checkpoint joins the view: one more checkpoint to check against the others.
    void this.view.observe(answer.note, `the answer for leaf ${answer.leafIndex}`);
  }

  async reader(): Promise<void> {
    while (this.reading) {
      const note = await this.fetchCheckpoint();
      const head = note ? await this.view.observe(note, 'checkpoint') : null;
      if (head && head.size > 0) await this.view.spotCheck(head, Math.floor(Math.random() * head.size));
      await sleep(READ_PAUSE_MS);
    }
  }

  progress(): void {
    const elapsedS = (performance.now() - this.started) / 1000;
    this.o.onProgress?.({
      elapsedS,
      treeSize: this.view.head?.size ?? 0,
      anchors: this.latencies.length,
      anchorsPerS: this.latencies.length / Math.max(elapsedS, 1e-3),
      pushback: this.pushback[429] + this.pushback[503],
      verified: this.view.counts.inclusionProofs,
      failures: this.view.failureCount,
    });
  }

  report(startSize: number, writeSeconds: number): HammerReport {
    const { o, view, latencies } = this;
    const perSecond = latencies.length / writeSeconds;
    const writeGoal = o.writeGoal !== undefined ? { target: o.writeGoal, met: perSecond >= o.writeGoal } : undefined;
    const endSize = view.head?.size ?? startSize;
    const unverified = view.unverified;
    if (unverified > 0)
      this.problem(`${unverified} acknowledged anchors were not proved included in any checkpoint read`);
    const ok =
      view.failureCount === 0 &&
      this.writeErrors === 0 &&
      this.readErrors === 0 &&
      unverified === 0 &&
      (writeGoal?.met ?? true);
    return {
      url: o.url,
      tiles: this.tilesBase,
      durationS: Math.round(writeSeconds * 100) / 100,
      tree: { startSize, endSize, growth: endSize - startSize },
      writes: {
        acknowledged: latencies.length,
        duplicates: this.duplicates,
        perSecond: Math.round(perSecond * 10) / 10,
        integrateMs: summarise(latencies),
        pushback: this.pushback,
        errors: this.writeErrors,
      },
      reads: { ...view.counts, errors: this.readErrors, unverified },
      verificationFailures: view.failureCount,
      problems: [...view.failures, ...this.problems].slice(0, KEPT_PROBLEMS),
      goals: writeGoal ? { writeGoal } : {},
      ok,
    };
  }
}
