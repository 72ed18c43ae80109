// RFC 7512 PKCS#11 URIs: what Stele reads from them, and what it refuses.
import { describe, expect, it } from 'vitest';
import { Pkcs11UriError, describeUri, parsePkcs11Uri } from '../../src/pkcs11/uri.js';

describe('PKCS#11 URIs (RFC 7512)', () => {
  it('reads the path and query attributes, percent-decoded', () => {
    const u = parsePkcs11Uri(
      'pkcs11:token=My%20Token;object=log%2Fkey;id=%01%a0;type=private;serial=1a40;slot-id=7?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/run/secrets/pin',
    );
    expect(u).toEqual({
      token: 'My Token',
      object: 'log/key',
      id: new Uint8Array([0x01, 0xa0]),
      type: 'private',
      serial: '1a40',
      slotId: 7,
      modulePath: '/usr/lib/softhsm/libsofthsm2.so',
      pinSource: 'file:/run/secrets/pin',
    });
    expect(parsePkcs11Uri('PKCS11:')).toEqual({});
    expect(parsePkcs11Uri('pkcs11:object=caf%C3%A9').object).toBe('café');
    // Vendor attributes (x-…) are allowed and ignored.
    expect(parsePkcs11Uri('pkcs11:token=t;x-vendor=1').token).toBe('t');
  });

  it('refuses a PIN in the URI, naming the ways to give it instead', () => {
    expect(() => parsePkcs11Uri('pkcs11:token=t?pin-value=1234')).toThrow(
      /pin-value is refused.*pin-source=file:<path> or STELE_PKCS11_PIN/,
    );
    try {
      parsePkcs11Uri('pkcs11:token=t?pin-value=98765');
    } catch (e) {
      expect((e as Error).message).not.toContain('98765');
    }
  });

  it('refuses what it cannot mean', () => {
    const bad: [string, RegExp][] = [
      ['file:/key', /starts with "pkcs11:"/],
      ['pkcs11:token=a;token=b', /"token" appears twice/],
      ['pkcs11:tokn=a', /unknown path attribute "tokn"/],
      ['pkcs11:token=a?module=x', /unknown query attribute "module"/],
      ['pkcs11:object', /is not name=value/],
      ['pkcs11:object=%zz', /bad percent-encoding/],
      ['pkcs11:object=%ff', /not UTF-8/],
      ['pkcs11:type=secret', /type must be one of/],
      ['pkcs11:slot-id=x', /slot-id must be a decimal number/],
    ];
    for (const [text, msg] of bad) expect(() => parsePkcs11Uri(text), text).toThrow(msg);
    expect(() => parsePkcs11Uri('pkcs11:tokn=a')).toThrow(Pkcs11UriError);
  });

  it('describes a URI by its token and object, without its module or PIN source', () => {
    const u = parsePkcs11Uri('pkcs11:token=stele;object=log;id=%01?module-path=/m.so&pin-source=/p');
    expect(describeUri(u)).toBe('pkcs11:token=stele;object=log');
  });
});
