// The CDK app: `npx cdk synth` (offline: no lookups, environment-agnostic) and
// `npx cdk deploy --parameters Origin=ledger.example.com/log …`.
// Context (-c key=value): stele:stackName (default Stele); stele:imageAsset=<dir> builds
// the container image from <dir>'s Dockerfile instead of the ImageRepository parameter.
import { App } from 'aws-cdk-lib';
import { SteleStack } from './stack.js';

const app = new App();
const stackName = (app.node.tryGetContext('stele:stackName') as string | undefined) ?? 'Stele';
const imageAsset = app.node.tryGetContext('stele:imageAsset') as string | undefined;
new SteleStack(app, stackName, {
  description: 'Stele: a C2SP tlog-tiles transparency log on S3, CloudFront, DynamoDB, KMS and Fargate',
  imageAsset,
});
app.synth();
