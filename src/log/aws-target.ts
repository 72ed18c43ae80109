// The AWS log as `stele log fsck` / `stele log recover` see it: the public prefix of the
// bucket (read and listed), the DynamoDB lock item, and the log's public key (KMS
// GetPublicKey, or a key file read without creating one), from the settings `stele serve`
// reads with STELE_BACKEND=aws (src/aws/log.ts awsLogConfigFromEnv). A bucket has no
// symlinks, so there is no file-kind check.
import { DynamoLock } from '../aws/dynamo-lock.js';
import { type AwsLogConfig, openAwsReader } from '../aws/log.js';
import { SIG_ED25519, makeVerifier } from '../core/note.js';
import type { FsckTarget } from './fsck.js';

export interface AwsTarget extends FsckTarget {
  readonly lock: DynamoLock;
  close(): Promise<void>;
}

export async function awsTarget(config: AwsLogConfig): Promise<AwsTarget> {
  const reader = await openAwsReader(config);
  const lock = new DynamoLock({ table: config.dynamo.table, log: config.origin, region: config.region, endpoint: config.dynamo.endpoint, credentials: config.credentials });
  const prefix = config.s3.publicPrefix ?? 'log/';
  return {
    where: `s3://${config.s3.bucket}/${prefix}`,
    store: reader.store,
    lock,
    lockName: `the DynamoDB lock item lock#${config.origin} in ${config.dynamo.table}`,
    key: makeVerifier(config.origin, SIG_ED25519, reader.publicKey),
    async close() {
      lock.client.destroy();
      await reader.close();
    },
  };
}
