// The enterprise control plane (/v1) mounted beside the ledger (issue 7). Its state lives
// under ControlDeps.dataDir:
//   control.toml        configuration ([control] table; or STELE_CONTROL_CONFIG)
//   control.key         the control plane's Ed25519 key (mode 0600; signs epochs and events)
//   policy/             Cedar policies, entities.json, optional schema.cedarschema
//   keks/               the demo KEKs (local provider), one mode-0600 file per epoch
//   state/key-epochs.json  the signed epoch chain (compare-and-swap)
//   audit/              the audit event segments
import { join } from 'node:path';
import type Koa from 'koa';
import type { Logger } from 'pino';
import type { AnchorRequest } from '../core/anchor.js';
import { createKmsClient } from '../aws/kms.js';
import type { LogReader } from '../read/reader.js';
import type { AnchorReceipt, OnCommitted, PublishedCheckpoint } from '../sequencer/contract.js';
import { FsObjectStore } from '../store/fs.js';
import { authFailureAggregator, controlMiddleware } from './app.js';
import type { AuthFailureAggregator } from './auth-failures.js';
import { AuditLog } from './audit.js';
import { OidcAuthenticator, RoleTable } from './auth.js';
import { type ControlConfig, resolveControlConfig } from './config.js';
import { KeyEpochs } from './epochs.js';
import { AwsKmsKekProvider, type KekProvider, LocalKekProvider } from '../keys/kek.js';
import { PolicyEngine } from '../policy/cedar.js';
import { Recorder } from './recorder.js';
import { ControlSigner } from './signing.js';

/** What the control plane needs from the ledger it records its decisions in. */
export interface ControlDeps {
  /**
   * Anchors an entry (policy_evaluation, access_decision, key_epoch, …) and resolves once it
   * is published; `onCommitted` hears its place once its batch is committed (Sequencer.submit).
   */
  submit(request: AnchorRequest, onCommitted?: OnCommitted): Promise<AnchorReceipt>;
  readonly reader: LogReader;
  checkpoint(): PublishedCheckpoint;
  /** Directory for the control plane's own state (keys, epochs, audit events, policies). */
  readonly dataDir: string;
  readonly logger: Logger;
  readonly env: NodeJS.ProcessEnv;
}

export interface MountedControlPlane {
  close(): Promise<void>;
}

/** The control plane's parts, opened over a data directory (also used by `stele control unwrap`). */
export interface ControlState {
  readonly config: ControlConfig;
  readonly signer: ControlSigner;
  readonly kek: KekProvider;
  readonly epochStore: FsObjectStore;
}

export async function openControlState(dataDir: string, env: NodeJS.ProcessEnv): Promise<ControlState> {
  const config = resolveControlConfig(dataDir, env);
  // A key in an HSM (PKCS#11) loads the pkcs11 code, and its native addon, only when configured.
  const signer = config.signerKey
    ? ControlSigner.fromHsm(
        await (await import('../pkcs11/signer.js')).Pkcs11Signer.open({
          uri: config.signerKey,
          name: config.signerName,
          env,
        }),
      )
    : await ControlSigner.open(join(dataDir, 'control.key'), config.signerName);
  let kek: KekProvider;
  try {
    kek =
      config.kek.provider === 'local'
        ? new LocalKekProvider(join(dataDir, 'keks'))
        : config.kek.provider === 'pkcs11'
          ? (await import('../pkcs11/kek.js')).Pkcs11KekProvider.open({
              uri: config.kek.pkcs11Uri!,
              env,
              timeoutMs: config.kek.timeoutMs,
            })
          : new AwsKmsKekProvider({
              client: createKmsClient(
                { region: config.kek.region, endpoint: config.kek.endpoint, timeoutMs: config.kek.timeoutMs },
                { endpoint: 'STELE_KEK_ENDPOINT', region: 'STELE_KEK_REGION' },
              ),
              initialKeyId: config.kek.initialKeyId,
              timeoutMs: config.kek.timeoutMs,
            });
  } catch (e) {
    await signer.close();
    throw e;
  }
  return { config, signer, kek, epochStore: new FsObjectStore(join(dataDir, 'state')) };
}

/** The signing key's epochs, each new one (the first, or a rotation) anchored in the ledger. */
function openKeyEpochs(
  store: FsObjectStore,
  signer: ControlSigner,
  kek: KekProvider,
  recorder: Recorder,
  logger: Logger,
): Promise<KeyEpochs> {
  return KeyEpochs.open(
    store,
    signer,
    kek,
    async (record, hash) => {
      const r = await recorder.record(
        'key_epoch',
        record.epoch === 1 ? 'Created' : 'Rotated',
        record as unknown as Record<string, unknown>,
        { artifact: `key-epoch-${record.epoch}` },
      );
      if (r.digest !== hash) throw new Error('key epoch digest mismatch');
      return r.ledgerEntryId;
    },
    logger,
  );
}

/** Mounts /v1 routes on `app`. */
export async function mountControlPlane(app: Koa, deps: ControlDeps): Promise<MountedControlPlane> {
  const logger = deps.logger.child({ component: 'control' });
  const { config, signer, kek, epochStore } = await openControlState(deps.dataDir, deps.env);
  const audit = await AuditLog.open(join(deps.dataDir, 'audit'), signer, { fsync: config.auditFsync, logger });
  const recorder = new Recorder(deps.submit, audit, config.ledgerScope);
  let policy: PolicyEngine | undefined;
  let authFailures: AuthFailureAggregator | undefined;
  const streams = new Set<() => void>();
  const state = { closing: false };
  try {
    const auth = new OidcAuthenticator(config.oidc);
    // An issuer that cannot be reached stops the start (one line, exit 3), as storage does.
    const idpProblem = await auth.checkReachable();
    if (idpProblem) logger.warn({ issuer: config.oidc.issuer }, idpProblem);
    policy = await PolicyEngine.open(config.policyDir, logger, {
      pollMs: config.policyPollMs,
      decisionCacheSize: config.policyDecisionCacheSize,
    });
    const epochs = await openKeyEpochs(epochStore, signer, kek, recorder, logger);
    const roles = new RoleTable(config.roles, config.oidc.mfaRoles);
    authFailures = authFailureAggregator({ config, recorder, logger });
    app.use(
      controlMiddleware({
        config,
        auth,
        roles,
        policy,
        epochs,
        audit,
        recorder,
        signer,
        logger,
        streams,
        state,
        authFailures,
      }),
    );
    logger.info(
      {
        issuer: config.oidc.issuer,
        audience: config.oidc.audience,
        policy: policy.version,
        epoch: epochs.current().epoch,
        kek: kek.kind,
        signer: signer.keyId,
      },
      'control plane mounted at /v1',
    );
  } catch (e) {
    authFailures?.close();
    policy?.close();
    await audit.close();
    await signer.close();
    kek.close?.();
    throw e;
  }
  const p = policy;
  return {
    async close() {
      // New requests are refused; decisions already being recorded finish (the ledger is
      // still running at this point) so each keeps its audit event; then streams end.
      state.closing = true;
      // The failures still being counted are recorded while the ledger runs.
      authFailures?.close();
      if (!(await recorder.drain())) logger.error('control plane closed with decisions still being recorded');
      for (const end of [...streams]) end();
      p.close();
      await audit.close();
      await signer.close();
      kek.close?.();
    },
  };
}
