// Authentication and authorisation of /v1 against a real OpenID Provider on loopback:
// every kind of bad token is a 401, a missing role or MFA a 403 with its reason, and every
// refusal is recorded (authentication_failure / access_decision) in the ledger and the audit stream.
import { SignJWT, decodeJwt, importJWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlClient } from '../../src/control/client.js';
import { startOidcProvider } from '../helpers/oidc.js';
import { AUDIENCE, CLIENTS, type ControlFixture, startControl } from './fixture.js';
import type { Json } from '../helpers/json.js';

const EVAL = { principal: 'User::"alice"', action: 'Action::"read"', resource: 'Document::"q3-report"' };
const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('control-plane authentication', () => {
  let f: ControlFixture;
  const evaluate = (token: string | undefined, headers: Record<string, string> = {}) =>
    f.call('POST', '/v1/policy/evaluate', { ...(token !== undefined ? { token } : {}), body: EVAL, headers });
  const expect401 = async (token: string | undefined, reason: string, headers: Record<string, string> = {}) => {
    const r = await evaluate(token, headers);
    expect(r.status, JSON.stringify(r.body)).toBe(401);
    expect(r.body.error.reason).toBe(reason);
    expect(r.body.error.code).toBe(reason === 'missing_token' ? 'missing_token' : 'invalid_token');
    expect(r.headers.get('www-authenticate')).toMatch(/^Bearer realm="stele-control"/);
    return r;
  };

  beforeAll(async () => {
    f = await startControl();
  });
  afterAll(() => f?.close());

  it('accepts a valid access token from the issuer', async () => {
    const r = await evaluate(await f.token('svc'));
    expect(r.status).toBe(200);
    expect(r.body.decision).toBe('allow');
  });

  it('rejects a missing or malformed Authorization header', async () => {
    await expect401(undefined, 'missing_token');
    await expect401(undefined, 'malformed_header', { authorization: 'Basic dXNlcjpwYXNz' });
    await expect401(undefined, 'malformed_header', { authorization: 'Bearer' });
    await expect401('not-a-jwt', 'malformed_token');
    await expect401(`${'a'.repeat(9000)}`, 'malformed_token');
  });

  it('rejects an expired token', async () => {
    const t = await f.token('short');
    expect((await evaluate(t)).status).toBe(200);
    // Valid a moment ago (and cached as verified): refused once exp has passed (tolerance 0 here).
    await sleep(decodeJwt(t).exp! * 1000 + 50 - Date.now());
    await expect401(t, 'token_expired');
  });

  it('rejects a token for another audience', async () => {
    const t = await f.token('svc', 'https://other-service.test/');
    expect(decodeJwt(t).aud).toBe('https://other-service.test/');
    await expect401(t, 'invalid_audience');
  });

  it('rejects a token from another issuer, even one signed by a trusted key', async () => {
    const other = await startOidcProvider({ clients: CLIENTS, defaultResource: AUDIENCE, keys: f.idp.keys });
    try {
      const t = await other.token('svc');
      expect(decodeJwt(t).iss).toBe(other.issuer);
      await expect401(t, 'invalid_issuer');
    } finally {
      await other.close();
    }
  });

  it('rejects unsigned and alg:none tokens', async () => {
    const [h, p] = (await f.token('svc')).split('.');
    await expect401(`${h}.${p}.`, 'invalid_signature');
    await expect401(`${h}.${p}`, 'malformed_token');
    const none = `${b64({ alg: 'none', typ: 'at+jwt' })}.${p}.`;
    await expect401(none, 'algorithm_not_allowed');
    const noneUpper = `${b64({ alg: 'NONE', typ: 'at+jwt', kid: decodeJwt(`${h}.${p}.x`).kid })}.${p}.`;
    await expect401(noneUpper, 'algorithm_not_allowed');
  });

  it('rejects a tampered token (claims changed after signing)', async () => {
    const [h, p, s] = (await f.token('svc')).split('.');
    const claims = JSON.parse(Buffer.from(p!, 'base64url').toString());
    await expect401(`${h}.${b64({ ...claims, roles: ['admin'], amr: ['hwk'] })}.${s}`, 'invalid_signature');
    await expect401(`${h}.${b64({ ...claims, exp: claims.exp + 3600 })}.${s}`, 'invalid_signature');
    // One flipped signature bit.
    const sig = Buffer.from(s!, 'base64url');
    sig[10]! ^= 1;
    await expect401(`${h}.${p}.${sig.toString('base64url')}`, 'invalid_signature');
  });

  it('rejects an HS256 token keyed with the public key (algorithm confusion) and non-access-token types', async () => {
    const [h, p] = (await f.token('svc')).split('.');
    const pub = f.idp.keys[0]!;
    const hs = await new SignJWT(JSON.parse(Buffer.from(p!, 'base64url').toString()))
      .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid: pub.kid! })
      .sign(new TextEncoder().encode(JSON.stringify({ kty: pub.kty, crv: pub.crv, x: pub.x, y: pub.y })));
    await expect401(hs, 'algorithm_not_allowed');
    // Signed by the IdP's own key, but typed as a generic JWT (e.g. an ID token): not an access token.
    const key = await importJWK(pub, 'ES256');
    const claims = JSON.parse(Buffer.from(p!, 'base64url').toString());
    const idLike = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', typ: 'JWT', kid: pub.kid! }).sign(key);
    await expect401(idLike, 'invalid_token_type');
    const noSub = await new SignJWT({ ...claims, sub: undefined })
      .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: pub.kid! })
      .sign(key);
    await expect401(noSub, 'invalid_claims');
    const notYet = await new SignJWT({ ...claims, nbf: Math.floor(Date.now() / 1000) + 600 })
      .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: pub.kid! })
      .sign(key);
    await expect401(notYet, 'token_not_yet_valid');
    expect(h).toBeTruthy();
  });

  it('requires phishing-resistant MFA for admin and analyst operations (403 with the reason)', async () => {
    const admin = await f.token('admin-nomfa');
    let r = await f.call('POST', '/v1/keys/rotate', { token: admin });
    expect(r.status).toBe(403);
    expect(r.body.error).toMatchObject({ code: 'mfa_required', reason: 'mfa_required', operation: 'keys.rotate' });
    expect(r.body.error.message).toMatch(/phishing-resistant MFA/);
    expect(r.body.error.decision_id).toMatch(/^dec_/);
    expect(r.body.error.ledger_entry_id).toMatch(/^led_\d+_[0-9a-f]{12}$/);
    // The admin role grants evaluation too, but only with MFA.
    r = await evaluate(admin);
    expect(r.status).toBe(403);
    expect(r.body.error.reason).toBe('mfa_required');
    r = await f.call('GET', '/v1/audit/events?follow=false', { token: await f.token('analyst-nomfa') });
    expect(r.status).toBe(403);
    expect(r.body.error.reason).toBe('mfa_required');
    // With MFA (amr hwk / acr phr) the same roles pass.
    r = await f.call('GET', '/v1/audit/events?follow=false&type=key_epoch', { token: await f.token('analyst') });
    expect(r.status).toBe(200);
    r = await f.call('POST', '/v1/keys/rotate', { token: await f.token('admin') });
    expect(r.status).toBe(201);
  });

  it('refuses operations the roles do not grant (403 forbidden)', async () => {
    let r = await f.call('POST', '/v1/keys/rotate', { token: await f.token('svc') });
    expect(r.status).toBe(403);
    expect(r.body.error).toMatchObject({ code: 'forbidden', reason: 'role_not_permitted', operation: 'keys.rotate' });
    r = await evaluate(await f.token('nobody'));
    expect(r.status).toBe(403);
    expect(r.body.error.reason).toBe('role_not_permitted');
    r = await f.call('POST', '/v1/access/lease', {
      token: await f.token('analyst'),
      body: { doc_id: 'd', compartment: 'demo' },
    });
    expect(r.status).toBe(403);
  });

  it('records every refusal in the audit stream with its ledger entry', async () => {
    const expected = [
      'missing_token',
      'malformed_header',
      'malformed_token',
      'token_expired',
      'invalid_audience',
      'invalid_issuer',
      'algorithm_not_allowed',
      'invalid_signature',
      'invalid_token_type',
    ];
    const analyst = new ControlClient(f.srv.url, await f.token('analyst'));
    // Authentication failures are recorded in the background (the 401 does not wait for the ledger).
    let events: Json[] = [];
    let reasons = new Set<string>();
    for (let i = 0; i < 50 && !expected.every((r) => reasons.has(r)); i++) {
      if (i > 0) await sleep(100);
      events = [];
      for await (const m of analyst.events({ follow: false })) events.push(JSON.parse(m.data));
      // Failures after the first of a source's window are recorded in its summary, counted by reason.
      reasons = new Set(
        events
          .filter((e) => e.type === 'authentication_failure')
          .flatMap((e) => [e.record.reason, ...Object.keys(e.record.reasons ?? {})]),
      );
    }
    const failures = events.filter((e) => e.type === 'authentication_failure');
    for (const r of expected) expect(reasons, r).toContain(r);
    for (const e of failures) {
      expect(e.ledger_entry_id).toMatch(/^led_/);
      expect(JSON.stringify(e.record)).not.toMatch(/eyJ/); // no token material, only its SHA-256
    }
    const denied = events.filter((e) => e.type === 'access_decision' && e.record.kind === 'operation_denied');
    expect(denied.map((e) => e.record.reason)).toEqual(expect.arrayContaining(['mfa_required', 'role_not_permitted']));
    const entry = await f.call('GET', `/api/ledger/entry?id=${denied[0].ledger_entry_id}`);
    expect(entry.status).toBe(200);
    expect(entry.body.entry).toMatchObject({ type: 'access_decision', result: 'Denied', digest: denied[0].digest });
  });

  it('follows an IdP key rotation: new-key tokens verify, old-key tokens are rejected', async () => {
    const old = await f.token('svc');
    expect((await evaluate(old)).status).toBe(200);
    await f.idp.rotateKeys();
    const fetches = f.idp.jwksFetches;
    const fresh = await f.idp.token('svc');
    expect(decodeJwt(fresh).sub).toBe('svc');
    // The new kid is unknown to the cached JWKS: it is refetched once and the token verifies.
    expect((await evaluate(fresh)).status).toBe(200);
    expect(f.idp.jwksFetches).toBeGreaterThan(fetches);
    // The old key is gone from the JWKS: its tokens no longer verify, cached or not.
    await expect401(old, 'unknown_signing_key');
    // A token naming a kid the IdP never had.
    const [, p, s] = fresh.split('.');
    await expect401(`${b64({ alg: 'ES256', typ: 'at+jwt', kid: 'k-never-existed' })}.${p}.${s}`, 'unknown_signing_key');
  });
});
