// The C2SP tlog-policy codec (src/core/tlog-policy.ts) against the text of tlog-policy.md: the
// example policy round-trips, quorums any / all / k-of-n / nested / none evaluate as the
// text defines them, and each rule of the grammar refuses with the line named.
import { describe, expect, it } from 'vitest';
import { SIG_COSIGNATURE_V1, SIG_ED25519, SeedSigner, formatVkey, makeVerifier } from '../../src/core/note.js';
import {
  PolicyError,
  describeQuorum,
  formatPolicy,
  minimumCosigners,
  parsePolicy,
  quorumMet,
  simpleThreshold,
  thresholdPolicy,
} from '../../src/core/tlog-policy.js';

const key = (name: string, seed: number, type: 0x01 | 0x04 = SIG_COSIGNATURE_V1) =>
  formatVkey(makeVerifier(name, type, new SeedSigner(name, new Uint8Array(32).fill(seed)).publicKey));
const LOG = key('example.com/log', 1, SIG_ED25519);
const W: Record<string, string> = Object.fromEntries(
  ['X1', 'X2', 'X3', 'Y1', 'Y2', 'Y3'].map((n, i) => [n, key(`${n.toLowerCase()}.example`, 10 + i)]),
);

// The example of tlog-policy.md ("Example policy"), with real keys, a comment and blank lines.
const EXAMPLE = `log ${LOG}

# X organisation
witness X1 ${W.X1}
witness X2 ${W.X2}
witness X3 ${W.X3} https://x3.example/witness
group X-witnesses 2 X1 X2 X3

witness Y1 ${W.Y1}
\twitness   Y2\t${W.Y2}
witness Y3 ${W.Y3}
group Y-witnesses any Y1 Y2 Y3

group X-and-Y all X-witnesses Y-witnesses
quorum X-and-Y
`;

const set = (...names: string[]) => new Set(names);

describe('tlog-policy codec', () => {
  it('parses the spec example and round-trips: parse(format(p)) equals p, and format is stable', () => {
    const p = parsePolicy(EXAMPLE);
    expect(p.logs).toEqual([{ vkey: LOG }]);
    expect(p.witnesses.map((w) => w.name)).toEqual(['X1', 'X2', 'X3', 'Y1', 'Y2', 'Y3']);
    expect(p.witnesses[2]).toEqual({ name: 'X3', vkey: W.X3, url: 'https://x3.example/witness' });
    expect(p.groups).toEqual([
      { name: 'X-witnesses', k: 2, members: ['X1', 'X2', 'X3'] },
      { name: 'Y-witnesses', k: 'any', members: ['Y1', 'Y2', 'Y3'] },
      { name: 'X-and-Y', k: 'all', members: ['X-witnesses', 'Y-witnesses'] },
    ]);
    expect(p.quorum).toBe('X-and-Y');
    const text = formatPolicy(p);
    expect(parsePolicy(text)).toEqual(p);
    expect(formatPolicy(parsePolicy(text))).toBe(text);
    expect(text).toContain(`witness X3 ${W.X3} https://x3.example/witness\n`);
    expect(text).toContain('group X-witnesses 2 X1 X2 X3\n');
    expect(text.endsWith('quorum X-and-Y\n')).toBe(true);
  });

  it('evaluates the nested quorum of the example: two X witnesses and one Y witness', () => {
    const p = parsePolicy(EXAMPLE);
    expect(quorumMet(p, set('X1', 'X2', 'Y3'))).toBe(true);
    expect(quorumMet(p, set('X1', 'X3', 'Y1', 'Y2'))).toBe(true);
    expect(quorumMet(p, set('X1', 'Y1', 'Y2', 'Y3'))).toBe(false); // one X only
    expect(quorumMet(p, set('X1', 'X2', 'X3'))).toBe(false); // no Y
    expect(quorumMet(p, set())).toBe(false);
    expect(describeQuorum(p)).toBe('all of (X-witnesses: 2 of (X1, X2, X3), Y-witnesses: any of (Y1, Y2, Y3))');
    expect(minimumCosigners(p)).toBe(3);
  });

  it('any is k = 1, all is k = n, a number is at least k of n; a witness as quorum needs that witness; none needs nothing', () => {
    const head = `witness A ${W.X1}\nwitness B ${W.X2}\nwitness C ${W.X3}\n`;
    const q = (group: string) => parsePolicy(`${head}group g ${group}\nquorum g\n`);
    const any = q('any A B C');
    expect([quorumMet(any, set()), quorumMet(any, set('C')), quorumMet(any, set('A', 'B', 'C'))]).toEqual([
      false,
      true,
      true,
    ]);
    const all = q('all A B C');
    expect([quorumMet(all, set('A', 'B')), quorumMet(all, set('A', 'B', 'C'))]).toEqual([false, true]);
    const two = q('2 A B C');
    expect([
      quorumMet(two, set('A')),
      quorumMet(two, set('A', 'C')),
      quorumMet(two, set('B', 'C')),
      quorumMet(two, set('A', 'B', 'C')),
    ]).toEqual([false, true, true, true]);
    // Names outside the policy never count.
    expect(quorumMet(two, set('A', 'D', 'E'))).toBe(false);
    const single = parsePolicy(`${head}quorum B\n`);
    expect([quorumMet(single, set('A', 'C')), quorumMet(single, set('B'))]).toEqual([false, true]);
    const none = parsePolicy(`${head}quorum none\n`);
    expect(quorumMet(none, set())).toBe(true);
    expect(describeQuorum(none)).toBe('none');
  });

  it('refuses a name listed as a member of two groups (or twice in one), naming the line', () => {
    // The policy: X1 alone would meet `all a b` if it counted for both groups.
    const shared = `witness X1 ${W.X1}\nwitness X2 ${W.X2}\nwitness X3 ${W.X3}\ngroup a any X1 X2\ngroup b any X1 X3\ngroup c all a b\nquorum c\n`;
    expect(() => parsePolicy(shared)).toThrow(/^line 5: group b: X1 is already a member of group a \(line 4\)/);
    expect(() => parsePolicy(`witness X1 ${W.X1}\ngroup a any X1 X1\nquorum a\n`)).toThrow(
      /^line 2: .*X1 is listed twice/,
    );
    // A group is a name too: listed in two groups, refused the same way.
    expect(() =>
      parsePolicy(
        `witness X1 ${W.X1}\nwitness X2 ${W.X2}\ngroup a any X1\ngroup b all a X2\ngroup c any a\nquorum b\n`,
      ),
    ).toThrow(/^line 5: group c: a is already a member of group b/);
    // Each name once: accepted, and only the real quorum meets it.
    const p = parsePolicy(
      `witness X1 ${W.X1}\nwitness X2 ${W.X2}\nwitness X3 ${W.X3}\ngroup a any X1 X2\ngroup c all a X3\nquorum c\n`,
    );
    expect([quorumMet(p, set('X1')), quorumMet(p, set('X1', 'X3'))]).toEqual([false, true]);
  });

  it('deep nesting stays linear: 80 groups, each all of the one before and a witness of its own', () => {
    let text = `witness A ${W.X1}\nwitness B ${W.X2}\nwitness C ${W.X3}\ngroup g0 all A B\n`;
    for (let i = 1; i < 80; i++) text += `group g${i} ${i === 79 ? 'all' : 'any'} g${i - 1}${i === 79 ? ' C' : ''}\n`;
    const p = parsePolicy(`${text}quorum g79\n`);
    expect(quorumMet(p, set('A', 'B', 'C'))).toBe(true);
    expect(quorumMet(p, set('A', 'C'))).toBe(false);
    expect(describeQuorum(p).length).toBeLessThan(10_000);
    expect(minimumCosigners(p)).toBe(3);
  });

  it('M of N policies: thresholdPolicy writes them, simpleThreshold reads them back', () => {
    const ws = [
      { name: 'a', vkey: W.X1! },
      { name: 'b', vkey: W.X2! },
    ];
    expect(simpleThreshold(thresholdPolicy([], ws, 1))).toBe(1);
    expect(simpleThreshold(thresholdPolicy([], ws, 2))).toBe(2);
    expect(thresholdPolicy([], ws, 0).quorum).toBe('none');
    expect(simpleThreshold(parsePolicy(EXAMPLE))).toBeNull();
    expect(() => thresholdPolicy([], ws, 3)).toThrow(PolicyError);
    // a witness named "quorum" does not collide with the group's name
    expect(parsePolicy(formatPolicy(thresholdPolicy([], [{ name: 'quorum', vkey: W.X1! }], 1))).quorum).toBe(
      'quorum-2',
    );
  });

  it('refuses what the grammar forbids, naming the line', () => {
    const bad = (text: string, msg: RegExp) => expect(() => parsePolicy(text)).toThrow(msg);
    bad(`witness A ${W.X1}\n`, /no quorum line/);
    bad(`witness A ${W.X1}\nquorum A\nquorum A\n`, /^line 3: a second quorum line/);
    bad(`quorum A\nwitness A ${W.X1}\n`, /^line 1: quorum: A is not a witness or group defined on a preceding line/);
    bad(`witness A ${W.X1}\ngroup g any A B\nquorum g\n`, /^line 2: group g: B is not/);
    bad(`witness A ${W.X1}\ngroup g any A A\nquorum g\n`, /^line 2: group g: A is listed twice/);
    bad(`witness A ${W.X1}\ngroup g any none\nquorum g\n`, /^line 2: group g: "none" cannot be a group member/);
    bad(
      `witness A ${W.X1}\ngroup g 2 A\nquorum g\n`,
      /^line 2: group g: threshold 2 is not between 1 and its 1 members/,
    );
    bad(`witness A ${W.X1}\ngroup g 0 A\nquorum g\n`, /threshold 0 is not between/);
    bad(`witness A ${W.X1}\ngroup g -1 A\nquorum g\n`, /threshold must be all, any or a decimal number/);
    bad(`witness A ${W.X1}\ngroup g any\nquorum g\n`, /^line 2: expected: group .*at least one member/);
    bad(`witness A ${W.X1}\nwitness A ${W.X2}\nquorum A\n`, /^line 2: the name A is already defined/);
    bad(`witness none ${W.X1}\nquorum none\n`, /^line 1: the name "none" is predefined/);
    // duplicate keys: "even if they differ by key name and key id"
    bad(`witness A ${W.X1}\nwitness B ${W.X1}\nquorum A\n`, /^line 2: witness B: the same public key as witness A/);
    const sameKeyOtherName = formatVkey(
      makeVerifier('other.example', SIG_COSIGNATURE_V1, new SeedSigner('x', new Uint8Array(32).fill(10)).publicKey),
    );
    bad(`witness A ${W.X1!}\nwitness B ${sameKeyOtherName}\nquorum A\n`, /^line 2: .*same public key/);
    bad(`log ${LOG}\nlog ${LOG}\nquorum none\n`, /^line 2: log: the same public key/);
    bad(`witness A ${LOG}\nquorum A\n`, /^line 1: witness A: key type 0x01 is not a cosignature key/);
    bad(
      `witness A ${W.X1!.replace(/\+[0-9a-f]{8}\+/, '+00000000+')}\nquorum A\n`,
      /^line 1: witness A: vkey key id does not match/,
    );
    bad(`witness A not-a-vkey\nquorum A\n`, /^line 1: witness A: a vkey has the form/);
    bad(`witness A ${W.X1} https://a.example extra\nquorum A\n`, /^line 1: expected: witness <name> <vkey> \[<url>\]/);
    bad(`witnesses A ${W.X1}\nquorum A\n`, /^line 1: unknown keyword "witnesses"/);
    bad(`witness A ${W.X1}\r\nquorum A\r\n`, /^line 1: carriage return/);
    bad(`# a comment with a bell \u0007\nquorum none\n`, /^line 1: control character 0x07/);
    // Allowed: comments after whitespace, blank lines of tabs, no final newline, non-ASCII names.
    expect(parsePolicy(`  # indented comment\n\t \nwitness Kelvin\u212a ${W.X1}\nquorum Kelvin\u212a`).quorum).toBe(
      'Kelvin\u212a',
    );
  });
});
