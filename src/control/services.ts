// What the /v1 routes work with: the control plane's services, opened by src/control/mount.ts.
import type { Logger } from 'pino';
import type { AuditLog } from './audit.js';
import type { AuthFailureAggregator } from './auth-failures.js';
import type { OidcAuthenticator, RoleTable } from './auth.js';
import type { ControlConfig } from './config.js';
import type { KeyEpochs } from './epochs.js';
import type { PolicyEngine } from '../policy/cedar.js';
import type { Recorder } from './recorder.js';
import type { ControlSigner } from './signing.js';

export interface ControlServices {
  readonly config: ControlConfig;
  readonly auth: OidcAuthenticator;
  readonly roles: RoleTable;
  readonly policy: PolicyEngine;
  readonly epochs: KeyEpochs;
  readonly audit: AuditLog;
  readonly recorder: Recorder;
  readonly signer: ControlSigner;
  readonly logger: Logger;
  /** Open SSE streams, ended on close (an open stream would keep the HTTP server from closing). */
  readonly streams: Set<() => void>;
  /** Authentication failures, aggregated per source and window before they are recorded. */
  readonly authFailures: AuthFailureAggregator;
  /** Set when the control plane is closing: new requests get 503. */
  readonly state: { closing: boolean };
}
