// The enterprise control plane (/v1) mounted beside the ledger (issue 7).
import type Koa from 'koa';
import type { Logger } from 'pino';
import type { AnchorRequest } from '../anchor.js';
import type { LogReader } from '../reader.js';
import type { AnchorReceipt, PublishedCheckpoint } from '../sequencer/sequencer.js';

/** What the control plane needs from the ledger it records its decisions in. */
export interface ControlDeps {
  /** Appends an entry (policy_evaluation, access_decision, key_epoch, …) and resolves once it is published. */
  submit(request: AnchorRequest): Promise<AnchorReceipt>;
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

/** Mounts /v1 routes on `app`. */
export async function mountControlPlane(_app: Koa, _deps: ControlDeps): Promise<MountedControlPlane> {
  throw new Error('the enterprise control plane is not available in this build');
}
