// The rules tools enforce on the CDK app, each shown refusing a planted violation:
//   - cdk-nag's AwsSolutions pack (the `cdk synth` gate, infra/nag.ts): no unacknowledged
//     finding on the default stack or its variants; every acknowledgement carries a written
//     reason; a bucket planted without TLS-only and access logs makes synth fail;
//   - the AWS Control Tower proactive controls (cfn-guard, @cdklabs/cdk-validator-cfnguard):
//     every violation on the synthesized templates is one of infra/guard.ts's explained
//     exceptions, on the resources it names; a planted unversioned bucket is reported.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CfnGuardValidator } from '@cdklabs/cdk-validator-cfnguard';
import { App, type IPolicyValidationContextBeta1, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { AwsSolutionsChecks } from 'cdk-nag';
import { describe, expect, it } from 'vitest';
import { GUARD_DISABLED_RULES, GUARD_EXCEPTIONS } from '../../infra/guard.js';
import { withNag } from '../../infra/nag.js';
import { SteleStack, type SteleStackProps } from '../../infra/stack.js';
import { SIG_COSIGNATURE_V1, formatVkey, makeVerifier } from '../../src/core/note.js';
import { scratchDir } from '../helpers/tmp.js';

const witness = makeVerifier('w1.example', SIG_COSIGNATURE_V1, new Uint8Array(32).fill(5));

/** The default stack and the variants the app can make. */
function variants(): [string, SteleStackProps][] {
  const explorer = scratchDir('stele-nag-explorer-');
  writeFileSync(join(explorer, 'index.html'), '<!doctype html><title>x</title>');
  mkdirSync(join(explorer, 'assets'));
  writeFileSync(join(explorer, 'assets', 'app.js'), '');
  return [
    ['Default', {}],
    ['BucketLock', { lock: 'bucket', multiRegionKey: true }],
    [
      'Explorer',
      {
        explorerDir: explorer,
        witnessPolicy: `witness w1 ${formatVkey(witness)} https://w1.example/\nquorum w1\n`,
      },
    ],
  ];
}

const findings = (app: App) =>
  new AwsSolutionsChecks(app)
    .validateScope(app)
    .violations.flatMap((v) => v.violatingResources.map((r) => `${v.ruleName} ${r.constructPath}`));

describe('cdk-nag (AwsSolutions) in the build', () => {
  it('no unacknowledged finding on the default stack or its variants; each acknowledgement has its reason', () => {
    for (const [name, props] of variants()) {
      const app = new App();
      const stack = new SteleStack(app, name, props);
      expect(findings(app), name).toEqual([]);
      const acks = stack.node
        .findAll()
        .flatMap((c) => c.node.metadata.filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY))
        .flatMap((m) => Object.entries(m.data as Record<string, string>));
      expect(acks.length, name).toBeGreaterThan(10);
      for (const [id, reason] of acks) expect(reason.length, `${name} ${id}`).toBeGreaterThanOrEqual(30);
    }
  }, 180_000);

  it('refuses a planted violation: synth fails naming the rule and the resource', () => {
    const outdir = scratchDir('stele-nag-planted-');
    const app = withNag(new App({ outdir }));
    const stack = new SteleStack(app, 'Planted');
    new s3.Bucket(stack, 'PlantedBucket'); // no access logs, TLS not required
    expect(findings(app)).toEqual(
      expect.arrayContaining([
        'AwsSolutions-S1 Planted/PlantedBucket/Resource',
        'AwsSolutions-S10 Planted/PlantedBucket/Resource',
      ]),
    );
    expect(() => app.synth()).toThrow(/has server access logs disabled[\s\S]*Planted\/PlantedBucket/);
    const report = JSON.parse(readFileSync(join(outdir, 'validation-report.json'), 'utf8')) as {
      pluginReports: { pluginName: string; conclusion: string; violations: { ruleName: string }[] }[];
    };
    const nag = report.pluginReports.find((p) => p.pluginName === 'AwsSolutions')!;
    expect(nag.conclusion).toBe('failure');
    expect(nag.violations.map((v) => v.ruleName).sort()).toEqual(['AwsSolutions-S1', 'AwsSolutions-S10']);
  }, 120_000);

  it('infra/app.ts (what `cdk synth` runs) synthesizes with the pack registered', () => {
    expect(readFileSync(new URL('../../infra/app.ts', import.meta.url), 'utf8')).toMatch(
      /withNag\(new App\(\{ autoSynth: false \}\)\)/,
    );
    const outdir = scratchDir('stele-nag-app-');
    const cwd = new URL('../..', import.meta.url).pathname;
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'infra/app.ts'], {
      cwd,
      env: { ...process.env, CDK_OUTDIR: outdir },
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(existsSync(join(outdir, 'Stele.template.json'))).toBe(true);
  }, 150_000);

  it('a bad -c stele:witnessPolicy is one line and exit 2, no stack trace and no half-built template', () => {
    const dir = scratchDir('stele-nag-policy-');
    writeFileSync(join(dir, 'bad.policy'), 'group a any nobody\nquorum a\n');
    const cwd = new URL('../..', import.meta.url).pathname;
    for (const [file, said] of [
      [join(dir, 'bad.policy'), /^stele cdk: context stele:witnessPolicy: line 1: group a: nobody is not a witness/],
      [join(dir, 'missing.policy'), /^stele cdk: context stele:witnessPolicy: cannot read .*missing\.policy: ENOENT$/],
    ] as const) {
      const outdir = join(dir, `out-${file.length}`);
      const r = spawnSync(process.execPath, ['--import', 'tsx', 'infra/app.ts'], {
        cwd,
        env: { ...process.env, CDK_OUTDIR: outdir, CDK_CONTEXT_JSON: JSON.stringify({ 'stele:witnessPolicy': file }) },
        encoding: 'utf8',
        timeout: 120_000,
      });
      expect(r.status).toBe(2);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr.trim()).toMatch(said);
      expect(existsSync(join(outdir, 'Stele.template.json'))).toBe(false);
    }
  }, 150_000);
});

describe('AWS Control Tower proactive controls (cfn-guard)', () => {
  const guard = (templatePath: string) =>
    new CfnGuardValidator({ disabledRules: Object.keys(GUARD_DISABLED_RULES) }).validate({
      templatePaths: [templatePath],
    } as IPolicyValidationContextBeta1);
  /** The violations (rule, logical id) no exception explains. */
  const unexplained = (templatePath: string) =>
    guard(templatePath)
      .violations.flatMap((v) => v.violatingResources.map((r) => [v.ruleName, r.resourceLogicalId] as const))
      .filter(
        ([rule, id]) =>
          !GUARD_EXCEPTIONS.some((e) => e.rule === rule && e.resources.some((prefix) => id.startsWith(prefix))),
      )
      .map(([rule, id]) => `${rule} ${id}`);
  const writeTemplate = (stack: SteleStack) => {
    const file = join(scratchDir('stele-guard-'), `${stack.stackName}.json`);
    writeFileSync(file, JSON.stringify(Template.fromStack(stack).toJSON()));
    return file;
  };

  it('every violation is an explained exception, on the resources it names (default stack and variants)', () => {
    for (const [name, props] of variants()) {
      const app = new App();
      const file = writeTemplate(new SteleStack(app, name, props));
      expect(unexplained(file), name).toEqual([]);
    }
    for (const e of GUARD_EXCEPTIONS) expect(e.reason.length, e.rule).toBeGreaterThanOrEqual(40);
    for (const [rule, reason] of Object.entries(GUARD_DISABLED_RULES)) expect(reason.length, rule).toBeGreaterThan(40);
  }, 180_000);

  it('reports a planted violation (an unversioned, unlogged bucket)', () => {
    const app = new App();
    const stack = new SteleStack(app, 'GuardPlanted');
    new s3.CfnBucket(stack, 'PlantedBucket');
    const found = unexplained(writeTemplate(stack));
    expect(found).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^s3_bucket_versioning_enabled_check PlantedBucket/),
        expect.stringMatching(/^s3_bucket_logging_enabled_check PlantedBucket/),
      ]),
    );
  }, 120_000);
});
