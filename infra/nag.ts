// cdk-nag's AwsSolutions pack as a CDK validation plugin: `cdk synth` (infra/app.ts) fails on
// any finding that is not acknowledged on its resource with a written reason
// (Validations.of(construct).acknowledge, see `acknowledge` in infra/stack/nag-acknowledgements.ts).
import { type App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';

export function withNag(app: App): App {
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return app;
}
