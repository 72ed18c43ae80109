// The CDK app: `npx cdk synth` (offline: no lookups, environment-agnostic) and
// `npx cdk deploy --parameters Origin=ledger.example.com/log …`.
// Context (-c key=value): stele:stackName (default Stele); stele:imageAsset=<dir> builds
// the container image from <dir>'s Dockerfile instead of the ImageRepository parameter;
// stele:lock=bucket keeps the sequencer's lock record in the bucket instead of DynamoDB;
// stele:witnessPolicy=<file> gives both services that C2SP tlog-policy (read and checked now,
// kept in the template: README "Deploy with CDK"); stele:multiRegionKey=true creates the log
// key as a multi-Region primary (only when the stack is first created).
import { readFileSync } from 'node:fs';
import { App } from 'aws-cdk-lib';
import { withNag } from './nag.js';
import { AppSettingError, SteleStack } from './stack.js';

function synth(): void {
  // cdk-nag (AwsSolutions) runs at synth: an unacknowledged finding fails it.
  // Synthesized below, once the stack is whole: a setting that fails leaves nothing half-built to synthesize.
  const app = withNag(new App({ autoSynth: false }));
  const stackName = (app.node.tryGetContext('stele:stackName') as string | undefined) ?? 'Stele';
  const imageAsset = app.node.tryGetContext('stele:imageAsset') as string | undefined;
  const lock = app.node.tryGetContext('stele:lock') as string | undefined;
  if (lock !== undefined && lock !== 'dynamodb' && lock !== 'bucket')
    throw new AppSettingError('context stele:lock must be dynamodb or bucket');
  const policyFile = app.node.tryGetContext('stele:witnessPolicy') as string | undefined;
  let witnessPolicy: string | undefined;
  if (policyFile) {
    try {
      witnessPolicy = readFileSync(policyFile, 'utf8');
    } catch (e) {
      throw new AppSettingError(
        `context stele:witnessPolicy: cannot read ${policyFile}: ${(e as NodeJS.ErrnoException).code}`,
      );
    }
  }
  const multiRegion = app.node.tryGetContext('stele:multiRegionKey') as string | boolean | undefined;
  new SteleStack(app, stackName, {
    description: 'Stele: a C2SP tlog-tiles transparency log on S3, CloudFront, DynamoDB, KMS and Fargate',
    imageAsset,
    lock,
    witnessPolicy,
    multiRegionKey: multiRegion === true || multiRegion === 'true',
  });
  app.synth();
}

try {
  synth();
} catch (e) {
  if (!(e instanceof AppSettingError)) throw e;
  process.stderr.write(`stele cdk: ${e.message}\n`);
  process.exitCode = 2;
}
