// Least privilege: the API role reads the public prefix and the table and may fetch the
// public key; only the sequencer role may write objects, write the table or kms:Sign.
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as kms from 'aws-cdk-lib/aws-kms';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { PUBLIC_PREFIX, STAGING_PREFIX } from './constants.js';
import type { ActiveTable } from './storage.js';

export interface LogResources {
  readonly bucket: s3.IBucket;
  readonly table: ActiveTable;
  readonly key: kms.IKey;
}

export function grantServiceAccess(sequencer: iam.IRole, api: iam.IRole, r: LogResources): void {
  const publicObjects = r.bucket.arnForObjects(`${PUBLIC_PREFIX}*`);
  const stagingObjects = r.bucket.arnForObjects(`${STAGING_PREFIX}*`);
  // ListBucket makes S3 answer 404 (not 403) for an absent key, which the store relies on.
  const listBucket = new iam.PolicyStatement({ actions: ['s3:ListBucket'], resources: [r.bucket.bucketArn] });
  sequencer.addToPrincipalPolicy(
    new iam.PolicyStatement({
      actions: ['s3:GetObject', 's3:PutObject', 's3:DeleteObject'],
      resources: [publicObjects, stagingObjects],
    }),
  );
  sequencer.addToPrincipalPolicy(listBucket);
  // The index's clear() (after a schema upgrade, or an index ahead of a rolled-back tree)
  // scans this log's rows and deletes them one by one; lookups read with Query.
  sequencer.addToPrincipalPolicy(
    new iam.PolicyStatement({
      actions: [
        'dynamodb:GetItem',
        'dynamodb:PutItem',
        'dynamodb:UpdateItem',
        'dynamodb:DeleteItem',
        'dynamodb:Query',
        'dynamodb:Scan',
      ],
      resources: [r.table.arn],
    }),
  );
  sequencer.addToPrincipalPolicy(
    new iam.PolicyStatement({ actions: ['kms:Sign', 'kms:GetPublicKey'], resources: [r.key.keyArn] }),
  );

  api.addToPrincipalPolicy(new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: [publicObjects] }));
  api.addToPrincipalPolicy(listBucket);
  api.addToPrincipalPolicy(
    new iam.PolicyStatement({
      actions: ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:Query'],
      resources: [r.table.arn],
    }),
  );
  api.addToPrincipalPolicy(new iam.PolicyStatement({ actions: ['kms:GetPublicKey'], resources: [r.key.keyArn] }));
}
