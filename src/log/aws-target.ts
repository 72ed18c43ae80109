// The AWS log as `stele log fsck` / `stele log recover` see it: the public prefix of the
// bucket (read and listed), the lock record (the DynamoDB item, or the bucket lock object
// under the staging prefix), and the log's public key (KMS
// GetPublicKey, or a key file read without creating one), from the settings `stele serve`
// reads with STELE_BACKEND=aws (src/serve/aws-log.ts awsLogConfigFromEnv). A bucket has no
// symlinks, so there is no file-kind check.
import { DynamoLock } from '../aws/dynamo-lock.js';
import { type AwsLogConfig, BUCKET_LOCK_KEY } from '../serve/aws-config.js';
import { awsBackends, awsPrivateStore, openAwsReader } from '../serve/aws-log.js';
import { SIG_ED25519, makeVerifier } from '../core/note.js';
import { type SequencerLock, StoreLock } from '../store/lock.js';
import type { FsckTarget } from './fsck.js';

export interface AwsTarget extends FsckTarget {
  readonly lock: SequencerLock;
  close(): Promise<void>;
}

export async function awsTarget(config: AwsLogConfig): Promise<AwsTarget> {
  const reader = await openAwsReader(config);
  const prefix = config.s3.publicPrefix ?? 'log/';
  const dynamo = config.lock !== 'bucket' ? config.dynamo : undefined;
  let lock: SequencerLock;
  let lockName: string;
  let release: () => void;
  if (dynamo) {
    const d = new DynamoLock({
      table: dynamo.table,
      log: config.origin,
      region: config.region,
      endpoint: dynamo.endpoint,
      credentials: config.credentials,
    });
    lock = d;
    lockName = `the DynamoDB lock item lock#${config.origin} in ${dynamo.table}`;
    release = () => d.client.destroy();
  } else {
    const { s3, staging } = awsBackends({ ...config, dynamo: undefined });
    lock = new StoreLock(staging, BUCKET_LOCK_KEY);
    lockName = `the bucket lock s3://${config.s3.bucket}/${staging.prefix}${BUCKET_LOCK_KEY}`;
    release = () => s3.destroy();
  }
  // Where a staged batch's records are, for fsck to re-apply it as a start would.
  const staging = awsPrivateStore(config);
  return {
    where: `s3://${config.s3.bucket}/${prefix}`,
    store: reader.store,
    lock,
    lockName,
    staging: staging.store,
    key: makeVerifier(config.origin, SIG_ED25519, reader.publicKey),
    async close() {
      release();
      staging.close();
      await reader.close();
    },
  };
}
