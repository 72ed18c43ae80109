// What of an entry a monitor's watch list matches: each kind of watch on its own field,
// nothing on a near miss, every match named.
import { describe, expect, it } from 'vitest';
import { matches } from '../../src/monitor/monitor.js';

const entry = {
  type: 'ledger_anchor',
  digest: 'ab'.repeat(32),
  artifact: 'release.tgz',
  artifactId: 'art_0123456789abcdef01234567',
  scope: 'releases',
  tenant: 'acme',
};

describe('watch list', () => {
  it('matches each field it watches, and names every match', () => {
    expect(matches({ digests: ['ab'.repeat(32)] }, entry)).toEqual([`digest ${'ab'.repeat(32)}`]);
    expect(matches({ artifacts: ['release.tgz'] }, entry)).toEqual(['artifact release.tgz']);
    expect(matches({ artifacts: ['art_0123456789abcdef01234567'] }, entry)).toEqual([
      'artifact art_0123456789abcdef01234567',
    ]);
    expect(matches({ scopes: ['releases'] }, entry)).toEqual(['scope releases']);
    expect(matches({ tenants: ['acme'] }, entry)).toEqual(['tenant acme']);
    expect(matches({ types: ['ledger_anchor'] }, entry)).toEqual(['type ledger_anchor']);
    expect(matches({ scopes: ['releases'], tenants: ['acme'] }, entry)).toEqual(['scope releases', 'tenant acme']);
  });

  it('matches nothing on a near miss or a missing field', () => {
    expect(matches({ tenants: ['acm'], scopes: ['release'], digests: ['cd'.repeat(32)] }, entry)).toEqual([]);
    expect(matches({ tenants: ['acme'] }, { ...entry, tenant: undefined })).toEqual([]);
    expect(matches({}, entry)).toEqual([]);
  });
});
