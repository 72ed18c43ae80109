// Key epochs: the customer KEK history as a chain of signed records. Each record names the
// epoch's KEK, the previous record's hash and the epochs it retires, is signed by the
// control plane's Ed25519 key, and is anchored in the ledger as a `key_epoch` entry whose
// digest is the record hash. The chain lives in one object swapped by compare-and-swap, so
// two rotations can never both extend the same head.
//
//   record_hash = SHA-256(RFC 8785 JSON of the signed record, signature included)
//   signature   = Ed25519 over "stele/control/key-epoch/v1\n" ‖ RFC 8785 JSON without `signature`
//
// A rotation is durable (stored) before it is anchored; a record left unanchored by a crash
// is anchored at the next start. The chain and every signature are verified on load.
import type { Logger } from 'pino';
import { VersionConflictError, type ObjectStore } from '../store/store.js';
import { ControlError, invalid } from './errors.js';
import { KekError, type KekKind, type KekProvider } from '../keys/kek.js';
import { type ControlSigner, EPOCH_DOMAIN, recordDigest, verifySigned } from './signing.js';

export const ZERO_HASH_HEX = '0'.repeat(64);
const STATE_KEY = 'key-epochs.json';

/** The signed part of an epoch record. */
export interface EpochRecord {
  readonly v: 1;
  readonly epoch: number;
  readonly kek_id: string;
  readonly kek_provider: KekKind;
  /** ISO 8601 UTC with milliseconds. */
  readonly created: string;
  /** `sub` of the admin who rotated, or `system` for the first epoch. */
  readonly created_by: string;
  readonly previous_record_hash: string;
  /** Epochs this rotation retires (absent when none). */
  readonly retires?: readonly number[];
  /** Key id of the control plane's signing key. */
  readonly key_id: string;
  readonly signature: string;
}

/** A record as listed: the signed record plus its hash, anchor and derived status. */
export interface EpochView extends EpochRecord {
  readonly record_hash: string;
  readonly ledger_entry_id: string | null;
  readonly status: 'current' | 'active' | 'retired';
}

interface Stored {
  readonly record: EpochRecord;
  readonly ledger_entry_id: string | null;
}

/** Anchors a record (type key_epoch) and emits its audit event; resolves to the ledger entry id. */
export type EpochAnchor = (record: EpochRecord, recordHash: string) => Promise<string>;

export const epochRecordHash = (r: EpochRecord): string => recordDigest(r);

/** Checks a list of records (oldest first): numbering, hash chain, signatures. Returns problems; empty means valid. */
export function verifyEpochChain(records: readonly EpochRecord[], publicKey: Uint8Array): string[] {
  const problems: string[] = [];
  let prev = ZERO_HASH_HEX;
  records.forEach((r, i) => {
    const signed: Record<string, unknown> = { ...r };
    delete signed.record_hash;
    delete signed.ledger_entry_id;
    delete signed.status;
    if (r.epoch !== i + 1) problems.push(`record ${i} has epoch ${r.epoch}, expected ${i + 1}`);
    if (r.previous_record_hash !== prev)
      problems.push(`epoch ${r.epoch}: previous_record_hash does not match the hash of epoch ${i}`);
    if (!verifySigned(EPOCH_DOMAIN, signed, publicKey)) problems.push(`epoch ${r.epoch}: signature does not verify`);
    prev = recordDigest(signed);
    const view = r as Partial<EpochView>;
    if (view.record_hash !== undefined && view.record_hash !== prev)
      problems.push(`epoch ${r.epoch}: record_hash does not match the record`);
  });
  return problems;
}

export class KeyEpochs {
  private stored: Stored[] = [];
  private version: string | null = null;
  private retired = new Set<number>();
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly store: ObjectStore,
    private readonly signer: ControlSigner,
    readonly kek: KekProvider,
    private readonly anchor: EpochAnchor,
    private readonly logger: Logger,
  ) {}

  /** Loads and verifies the chain, anchors any unanchored record, and creates epoch 1 if there is none. */
  static async open(
    store: ObjectStore,
    signer: ControlSigner,
    kek: KekProvider,
    anchor: EpochAnchor,
    logger: Logger,
  ): Promise<KeyEpochs> {
    const e = new KeyEpochs(store, signer, kek, anchor, logger);
    await e.load();
    const problems = verifyEpochChain(
      e.stored.map((s) => s.record),
      signer.publicKey,
    );
    if (problems.length > 0) throw new Error(`key epoch chain in ${STATE_KEY} is invalid: ${problems.join('; ')}`);
    for (const s of e.stored) {
      if (s.record.kek_provider !== kek.kind)
        throw new Error(
          `epoch ${s.record.epoch} was created with KEK provider ${s.record.kek_provider}, but ${kek.kind} is configured`,
        );
    }
    for (const s of [...e.stored]) if (s.ledger_entry_id === null) await e.anchorStored(s.record.epoch);
    if (e.stored.length === 0) await e.rotate('system');
    return e;
  }

  /** Loads and verifies the chain without writing anything (for offline tools such as `stele control unwrap`). */
  static async readOnly(
    store: ObjectStore,
    signer: ControlSigner,
    kek: KekProvider,
    logger: Logger,
  ): Promise<KeyEpochs> {
    const e = new KeyEpochs(store, signer, kek, () => Promise.reject(new Error('read-only key epochs')), logger);
    await e.load();
    const problems = verifyEpochChain(
      e.stored.map((s) => s.record),
      signer.publicKey,
    );
    if (problems.length > 0) throw new Error(`key epoch chain in ${STATE_KEY} is invalid: ${problems.join('; ')}`);
    if (e.stored.length === 0) throw new Error('no key epochs exist yet (start the control plane first)');
    return e;
  }

  private async load(): Promise<void> {
    const v = await this.store.getVersioned(STATE_KEY);
    this.version = v?.version ?? null;
    this.stored = v ? (JSON.parse(new TextDecoder().decode(v.data)) as Stored[]) : [];
    this.retired = new Set(this.stored.flatMap((s) => s.record.retires ?? []));
  }

  private async save(next: Stored[]): Promise<void> {
    this.version = await this.store.swap(
      STATE_KEY,
      new TextEncoder().encode(`${JSON.stringify(next, null, 1)}\n`),
      this.version,
    );
    this.stored = next;
    this.retired = new Set(next.flatMap((s) => s.record.retires ?? []));
  }

  private async anchorStored(epoch: number): Promise<string> {
    const s = this.stored[epoch - 1]!;
    const id = await this.anchor(s.record, epochRecordHash(s.record));
    await this.save(this.stored.map((x) => (x.record.epoch === epoch ? { ...x, ledger_entry_id: id } : x)));
    return id;
  }

  private view(s: Stored): EpochView {
    const last = this.stored.length;
    const status = this.retired.has(s.record.epoch) ? 'retired' : s.record.epoch === last ? 'current' : 'active';
    return { ...s.record, record_hash: epochRecordHash(s.record), ledger_entry_id: s.ledger_entry_id, status };
  }

  list(): EpochView[] {
    return this.stored.map((s) => this.view(s));
  }

  current(): EpochView {
    const last = this.stored.at(-1);
    if (!last) throw new Error('no key epoch exists');
    return this.view(last);
  }

  get(epoch: number): EpochView | undefined {
    const s = Number.isSafeInteger(epoch) && epoch >= 1 ? this.stored[epoch - 1] : undefined;
    return s && this.view(s);
  }

  /** The KEK of `epoch` if the epoch can still unwrap. */
  usableKek(epoch: number): string {
    const v = this.get(epoch);
    if (!v) throw new KekError('kek_unavailable', `no key epoch ${epoch}`);
    if (v.status === 'retired')
      throw new KekError(
        'kek_retired',
        `key epoch ${epoch} is retired; leases wrapped under it can no longer be unwrapped`,
      );
    return v.kek_id;
  }

  /**
   * Starts a new epoch (one rotation at a time in this process; the store's compare-and-swap
   * refuses a concurrent rotation by another process with 409). `retireBefore` retires every
   * still-active epoch numbered below it.
   */
  rotate(by: string, retireBefore?: number): Promise<EpochView> {
    const run = this.queue.then(() => this.rotateNow(by, retireBefore));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async rotateNow(by: string, retireBefore?: number): Promise<EpochView> {
    const prev = this.stored.at(-1);
    const epoch = (prev?.record.epoch ?? 0) + 1;
    if (
      retireBefore !== undefined &&
      (!Number.isSafeInteger(retireBefore) || retireBefore < 1 || retireBefore > epoch)
    ) {
      throw invalid('invalid_retire_before', `retire_before must be an integer from 1 to ${epoch} (the new epoch)`);
    }
    const retires =
      retireBefore === undefined
        ? []
        : this.stored.map((s) => s.record.epoch).filter((n) => n < retireBefore && !this.retired.has(n));
    const kekId = await this.kek.create(epoch);
    const unsigned = {
      v: 1 as const,
      epoch,
      kek_id: kekId,
      kek_provider: this.kek.kind,
      created: new Date().toISOString(),
      created_by: by,
      previous_record_hash: prev ? epochRecordHash(prev.record) : ZERO_HASH_HEX,
      ...(retires.length > 0 ? { retires } : {}),
      key_id: this.signer.keyId,
    };
    const record = this.signer.sign(EPOCH_DOMAIN, unsigned) as EpochRecord;
    try {
      await this.save([...this.stored, { record, ledger_entry_id: null }]);
    } catch (e) {
      if (e instanceof VersionConflictError) {
        await this.load();
        throw new ControlError(
          409,
          'rotation_conflict',
          'another rotation changed the key epochs first; list the epochs and retry',
        );
      }
      throw e;
    }
    for (const n of retires) {
      await this.kek.retire(this.stored[n - 1]!.record.kek_id).catch((e: unknown) => {
        this.logger.error(
          { epoch: n, err: (e as Error).message },
          'destroying a retired KEK failed; the epoch is refused regardless',
        );
      });
    }
    await this.anchorStored(epoch);
    return this.view(this.stored[epoch - 1]!);
  }
}
