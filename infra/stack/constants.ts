// The names the stack and the services it runs agree on: object prefixes, the port, the
// routes and headers the load balancer, the WAF and CloudFront match.

/** Where the services write the witness policy at start (a path of the container's own, writable by its user). */
export const WITNESS_POLICY_FILE = '/tmp/witnesses.policy';

/** Object prefixes in the bucket; must match the services' STELE_S3_PREFIX / STELE_S3_STAGING_PREFIX. */
export const PUBLIC_PREFIX = 'log/';
export const STAGING_PREFIX = 'private/';
/** The port both services listen on inside their tasks. */
export const PORT = 8080;
/** The header CloudFront adds with the origin-verify secret and the load balancer requires. */
export const ORIGIN_VERIFY_HEADER = 'X-Stele-Origin-Verify';
/** The API route the WAF rate-limits per client address (POST only). */
export const ANCHOR_PATH = '/api/ledger/anchor';
/** CloudFront's managed prefix list of origin-facing addresses (looked up in the deploy region). */
export const CLOUDFRONT_ORIGIN_FACING = 'com.amazonaws.global.cloudfront.origin-facing';
