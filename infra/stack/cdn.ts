// CloudFront in front of the bucket and the load balancer:
//   /checkpoint, /checkpoint.json   cached ≤ 2 s at the edge
//   /tile/*                         cached a year (immutable objects)
//   /api/ledger/*                   → the load balancer over HTTPS, no caching, all methods
// on the DomainName certificate (TLS ≥ 1.2), behind the web ACL, with access logs.
import { Aws, Duration, Fn, type Stack } from 'aws-cdk-lib';
import * as cloudfront from 'aws-cdk-lib/aws-cloudfront';
import * as origins from 'aws-cdk-lib/aws-cloudfront-origins';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type * as wafv2 from 'aws-cdk-lib/aws-wafv2';
import { ORIGIN_VERIFY_HEADER, PUBLIC_PREFIX } from './constants.js';
import { acknowledge } from './nag-acknowledgements.js';
import type { StackConditions, StackParameters } from './parameters.js';

interface Behaviors {
  readonly checkpoint: cloudfront.BehaviorOptions;
  readonly tileCache: cloudfront.ICachePolicy;
  readonly apiOrigin: cloudfront.IOrigin;
}

function behaviors(stack: Stack, bucket: s3.IBucket, p: StackParameters, originSecretValue: string): Behaviors {
  // OAC grants the distribution (only it: AWS:SourceArn) GetObject and ListBucket. With
  // ListBucket S3 answers 404, not 403, for a missing tile, so tlog clients fall back from
  // a swept partial to the full tile. The origin path keeps requests inside the public prefix.
  const tilesOrigin = origins.S3BucketOrigin.withOriginAccessControl(bucket, {
    originPath: `/${PUBLIC_PREFIX.slice(0, -1)}`,
    originAccessLevels: [cloudfront.AccessLevel.READ, cloudfront.AccessLevel.LIST],
  });
  const apiOrigin = new origins.HttpOrigin(p.OriginDomainName.valueAsString, {
    protocolPolicy: cloudfront.OriginProtocolPolicy.HTTPS_ONLY,
    originSslProtocols: [cloudfront.OriginSslPolicy.TLS_V1_2],
    customHeaders: { [ORIGIN_VERIFY_HEADER]: originSecretValue },
    readTimeout: Duration.seconds(60),
  });
  const checkpointCache = new cloudfront.CachePolicy(stack, 'CheckpointCache', {
    // 1-2 s at the edge even though the object says no-cache: absorbs polling storms.
    comment: 'Stele checkpoint: at most 2 s at the edge',
    minTtl: Duration.seconds(1),
    defaultTtl: Duration.seconds(1),
    maxTtl: Duration.seconds(2),
    enableAcceptEncodingGzip: true,
    enableAcceptEncodingBrotli: true,
  });
  const tileCache = new cloudfront.CachePolicy(stack, 'TileCache', {
    comment: 'Stele tiles and bundles: immutable',
    minTtl: Duration.days(1),
    defaultTtl: Duration.days(365),
    maxTtl: Duration.days(365),
    enableAcceptEncodingGzip: true,
    enableAcceptEncodingBrotli: true,
  });
  const checkpoint: cloudfront.BehaviorOptions = {
    origin: tilesOrigin,
    viewerProtocolPolicy: cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
    cachePolicy: checkpointCache,
    allowedMethods: cloudfront.AllowedMethods.ALLOW_GET_HEAD_OPTIONS,
    responseHeadersPolicy: cloudfront.ResponseHeadersPolicy.CORS_ALLOW_ALL_ORIGINS,
  };
  return { checkpoint, tileCache, apiOrigin };
}

export interface CdnSettings {
  readonly bucket: s3.IBucket;
  readonly logBucket: s3.IBucket;
  readonly params: StackParameters;
  readonly conditions: StackConditions;
  readonly originSecretValue: string;
  readonly webAcl: wafv2.CfnWebACL;
}

export function edgeDistribution(stack: Stack, s: CdnSettings): cloudfront.Distribution {
  const b = behaviors(stack, s.bucket, s.params, s.originSecretValue);
  const cdn = new cloudfront.Distribution(stack, 'Cdn', {
    comment: 'Stele transparency log',
    priceClass: cloudfront.PriceClass.PRICE_CLASS_100,
    httpVersion: cloudfront.HttpVersion.HTTP2_AND_3,
    defaultBehavior: b.checkpoint,
    // The explorer (dist/explorer) is published beside the tiles; / serves its page.
    defaultRootObject: 'index.html',
    enableLogging: true,
    logBucket: s.logBucket,
    logFilePrefix: 'cloudfront/',
    additionalBehaviors: {
      '/checkpoint': b.checkpoint,
      '/checkpoint.json': b.checkpoint,
      '/tile/*': { ...b.checkpoint, cachePolicy: b.tileCache, compress: true },
      '/api/ledger/*': {
        origin: b.apiOrigin,
        viewerProtocolPolicy: cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
        cachePolicy: cloudfront.CachePolicy.CACHING_DISABLED,
        originRequestPolicy: cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
        allowedMethods: cloudfront.AllowedMethods.ALLOW_ALL,
      },
    },
    // Never remember a miss or an API error at the edge (default: 10 s).
    errorResponses: [403, 404, 500, 502, 503, 504].map((httpStatus) => ({ httpStatus, ttl: Duration.seconds(0) })),
  });
  nameCertificateAndAcl(cdn, s);
  acknowledge(cdn, 'AwsSolutions-CFR1', 'A transparency log is public by design: no geographic restriction.');
  acknowledge(
    cdn,
    'AwsSolutions-CFR2',
    'The web ACL is attached through a condition (created in us-east-1, else the WebAclArn parameter), which cdk-nag cannot follow.',
  );
  return cdn;
}

/** The public name, on an ACM certificate, SNI, TLS 1.2 at least; the web ACL. */
function nameCertificateAndAcl(cdn: cloudfront.Distribution, s: CdnSettings): void {
  const { params: p, conditions: c } = s;
  const cfn = cdn.node.defaultChild as cloudfront.CfnDistribution;
  cfn.addPropertyOverride('DistributionConfig.Aliases', [p.DomainName.valueAsString]);
  cfn.addPropertyOverride('DistributionConfig.ViewerCertificate', {
    AcmCertificateArn: p.CertificateArn.valueAsString,
    SslSupportMethod: 'sni-only',
    MinimumProtocolVersion: 'TLSv1.2_2021',
  });
  cfn.addPropertyOverride(
    'DistributionConfig.WebACLId',
    Fn.conditionIf(
      c.createWebAcl.logicalId,
      s.webAcl.attrArn,
      Fn.conditionIf(c.hasWebAclArn.logicalId, p.WebAclArn.valueAsString, Aws.NO_VALUE),
    ),
  );
}
