// The web ACL in front of CloudFront: a per-address rate limit on anchors and AWS's IP
// reputation list.
import type { Stack } from 'aws-cdk-lib';
import * as wafv2 from 'aws-cdk-lib/aws-wafv2';
import { ANCHOR_PATH } from './constants.js';
import type { StackConditions, StackParameters } from './parameters.js';

/**
 * A CLOUDFRONT-scope web ACL exists only in us-east-1: this stack creates it when deployed
 * there; elsewhere WebAclArn names one made in us-east-1 (README).
 */
export function cloudFrontWebAcl(stack: Stack, p: StackParameters, c: StackConditions): wafv2.CfnWebACL {
  const webAcl = new wafv2.CfnWebACL(stack, 'WebAcl', {
    scope: 'CLOUDFRONT',
    defaultAction: { allow: {} },
    visibilityConfig: { sampledRequestsEnabled: true, cloudWatchMetricsEnabled: true, metricName: 'SteleWebAcl' },
    rules: [
      {
        name: 'AnchorRate',
        priority: 0,
        action: { block: {} },
        statement: {
          rateBasedStatement: {
            limit: p.AnchorRateLimit.valueAsNumber,
            aggregateKeyType: 'IP',
            scopeDownStatement: {
              andStatement: {
                statements: [
                  {
                    byteMatchStatement: {
                      fieldToMatch: { method: {} },
                      positionalConstraint: 'EXACTLY',
                      searchString: 'POST',
                      textTransformations: [{ priority: 0, type: 'NONE' }],
                    },
                  },
                  {
                    byteMatchStatement: {
                      fieldToMatch: { uriPath: {} },
                      positionalConstraint: 'EXACTLY',
                      searchString: ANCHOR_PATH,
                      textTransformations: [{ priority: 0, type: 'NONE' }],
                    },
                  },
                ],
              },
            },
          },
        },
        visibilityConfig: { sampledRequestsEnabled: true, cloudWatchMetricsEnabled: true, metricName: 'AnchorRate' },
      },
      {
        name: 'AmazonIpReputation',
        priority: 1,
        overrideAction: { none: {} },
        statement: {
          managedRuleGroupStatement: { vendorName: 'AWS', name: 'AWSManagedRulesAmazonIpReputationList' },
        },
        visibilityConfig: {
          sampledRequestsEnabled: true,
          cloudWatchMetricsEnabled: true,
          metricName: 'AmazonIpReputation',
        },
      },
    ],
  });
  webAcl.cfnOptions.condition = c.createWebAcl;
  return webAcl;
}
