// The CloudWatch Synthetics canary's script (Node.js runtime; the handler's promise resolves
// for a pass, rejects for a failure). It fetches `checkpoint.json` through CloudFront, as a
// client does, and fails when the published checkpoint is older than MAX_AGE_SECONDS, or when
// it cannot be fetched or read: a stalled sequencer, a broken origin or a stale edge all end
// here, seen from outside the VPC. test/infra/canary.test.ts runs this very text against a
// local server.
export const CANARY_SCRIPT = `
exports.handler = async () => {
  const url = process.env.CHECKPOINT_URL;
  const maxAge = Number(process.env.MAX_AGE_SECONDS);
  const res = await fetch(url, { headers: { 'cache-control': 'no-cache' } });
  if (res.status !== 200) throw new Error(url + ': HTTP ' + res.status);
  let body;
  try {
    body = JSON.parse(await res.text());
  } catch {
    throw new Error(url + ': not JSON');
  }
  const published = typeof body.timestamp === 'string' ? Date.parse(body.timestamp) : NaN;
  const size = typeof body.note === 'string' ? body.note.split('\\n')[1] : undefined;
  if (!Number.isFinite(published) || !size) throw new Error(url + ': not a checkpoint.json (note, timestamp)');
  const age = Math.round((Date.now() - published) / 1000);
  if (age > maxAge) throw new Error(url + ': the checkpoint (size ' + size + ') is ' + age + ' s old, more than ' + maxAge + ' s');
  return 'size ' + size + ', published ' + age + ' s ago';
};
`;
