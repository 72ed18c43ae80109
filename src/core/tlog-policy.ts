// C2SP tlog-policy (https://c2sp.org/tlog-policy): the text format naming the logs a
// verifier accepts, the witnesses it knows, and the quorum of cosignatures it requires.
// Pure and browser-safe (no Buffer, no node: imports), so the explorer can use it too.
//
//   log <vkey> [<url>]
//   witness <name> <vkey> [<url>]
//   group <name> all|any|<k> <name>...
//   quorum <name>            (a witness, a group, or the predefined `none`)
//
// Parsing is strict (errors name the line); formatting writes logs, witnesses, groups in
// their order, then the quorum line, so parse(format(p)) equals p.
import { fromBase64, sha256, toHex } from './hash.js';

export interface PolicyLog {
  readonly vkey: string;
  readonly url?: string;
}

export interface PolicyWitness {
  /** The policy's own name for it ("no meaning outside of the policy file itself"). */
  readonly name: string;
  readonly vkey: string;
  /** tlog-policy: "recommended that it is the witness' submission prefix URL". */
  readonly url?: string;
}

export interface PolicyGroup {
  readonly name: string;
  /** As written: `all` (k = n), `any` (k = 1) or a number 1 ≤ k ≤ n. */
  readonly k: 'all' | 'any' | number;
  readonly members: readonly string[];
}

export interface Policy {
  readonly logs: readonly PolicyLog[];
  readonly witnesses: readonly PolicyWitness[];
  readonly groups: readonly PolicyGroup[];
  /** A witness name, a group name, or `none`. */
  readonly quorum: string;
}

/** The predefined name: "it can be used when defining the quorum, but it is invalid as a group member". */
export const QUORUM_NONE = 'none';

/** Signature types a witness key may have (tlog-cosignature: 0x04 Ed25519, 0x06 ML-DSA-44). */
export const WITNESS_KEY_TYPES: ReadonlySet<number> = new Set([0x04, 0x06]);

export class PolicyError extends Error {
  override name = 'PolicyError';
}

/** A vkey's parts, checked structurally (signed-note: `<name>+hex(key ID)+base64(type ‖ key)`). */
export interface VkeyParts {
  readonly name: string;
  readonly keyId: string;
  readonly type: number;
  readonly key: Uint8Array;
}

const utf8 = new TextEncoder();
/** Public key lengths of the types whose key ID signed-note and tlog-cosignature define. */
const KEY_LENGTH: Record<number, number> = { 0x01: 32, 0x04: 32, 0x06: 1312 };

/**
 * Splits and checks a vkey. For types 0x01, 0x04 and 0x06 the key length and the key ID
 * (SHA-256(name ‖ "\n" ‖ type ‖ key)[:4]) are checked too; other types (e.g. 0x02, whose
 * key ID is computed differently) only structurally.
 */
export function splitVkey(vkey: string): VkeyParts {
  // Split at the first two '+' only: names have none, but base64 may contain '+'.
  const a = vkey.indexOf('+');
  const b = a < 0 ? -1 : vkey.indexOf('+', a + 1);
  if (b < 0) throw new PolicyError('a vkey has the form <name>+<key id>+<base64 key>');
  const name = vkey.slice(0, a);
  const keyId = vkey.slice(a + 1, b);
  if (name === '' || /[\s+]/u.test(name))
    throw new PolicyError(`vkey key name ${JSON.stringify(name)} is empty or has spaces`);
  if (!/^[0-9a-f]{8}$/.test(keyId)) throw new PolicyError('vkey key id must be 8 lowercase hex characters');
  const raw = fromBase64(vkey.slice(b + 1));
  if (!raw || raw.length < 2) throw new PolicyError('vkey key is not base64 of a type byte and a public key');
  const type = raw[0]!;
  const key = raw.slice(1);
  const want = KEY_LENGTH[type];
  if (want !== undefined) {
    if (key.length !== want) throw new PolicyError(`vkey of type 0x${hex2(type)} must carry a ${want}-byte public key`);
    const id = sha256(new Uint8Array([...utf8.encode(`${name}\n`), type, ...key])).subarray(0, 4);
    if (toHex(id) !== keyId) throw new PolicyError('vkey key id does not match its name and key');
  }
  return { name, keyId, type, key };
}

const hex2 = (n: number) => n.toString(16).padStart(2, '0');

/** "Two vkeys are considered duplicate if they wrap the same underlying public key, even if they differ by key name and key id." */
const keyMaterial = (p: VkeyParts) => toHex(p.key);

// "whitespace ... means sequences of ASCII space and tab characters *only*".
const FIELDS = /[ \t]+/;
const trimWs = (s: string) => s.replace(/^[ \t]+|[ \t]+$/g, '');
// "the allowed octet values are 0x09 (tab), 0x0A (newline), 0x20-0x7E, and 0x80-0xFF".
const FORBIDDEN = /[\x00-\x08\x0b-\x1f\x7f]/;

/** Parses a tlog-policy text; throws PolicyError("line N: …") on the first problem. */
export function parsePolicy(text: string): Policy {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const parser = new PolicyParser();
  lines.forEach((raw, i) => parser.line(raw, i + 1));
  return parser.policy();
}

/** The state of a policy read line by line: what each line may refer to is what came before it. */
class PolicyParser {
  private readonly logs: PolicyLog[] = [];
  private readonly witnesses: PolicyWitness[] = [];
  private readonly groups: PolicyGroup[] = [];
  private quorum: string | undefined;
  private readonly defined = new Set<string>();
  /** Key material → what it was given for (a key may appear once in a policy). */
  private readonly keys = new Map<string, string>();
  // "Each defined name can be listed as a group member at most once": name → the group and line that list it.
  private readonly listedIn = new Map<string, string>();
  private lineNo = 0;

  line(raw: string, lineNo: number): void {
    this.lineNo = lineNo;
    const bad = FORBIDDEN.exec(raw);
    if (bad)
      this.fail(
        bad[0] === '\r'
          ? 'carriage return (CRLF line endings are not allowed)'
          : `control character 0x${hex2(bad[0].charCodeAt(0))} is not allowed`,
      );
    const line = trimWs(raw);
    if (line === '' || line.startsWith('#')) return;
    const [keyword, ...args] = line.split(FIELDS) as [string, ...string[]];
    if (keyword === 'log') this.log(args);
    else if (keyword === 'witness') this.witness(args);
    else if (keyword === 'group') this.group(args);
    else if (keyword === 'quorum') this.quorumLine(args);
    else this.fail(`unknown keyword ${JSON.stringify(keyword)} (expected log, witness, group or quorum)`);
  }

  policy(): Policy {
    if (this.quorum === undefined)
      throw new PolicyError('no quorum line (a policy has exactly one; `quorum none` requires no cosignatures)');
    return { logs: this.logs, witnesses: this.witnesses, groups: this.groups, quorum: this.quorum };
  }

  private fail(msg: string): never {
    throw new PolicyError(`line ${this.lineNo}: ${msg}`);
  }

  private vkeyAt(vkey: string, what: string): VkeyParts {
    let p: VkeyParts;
    try {
      p = splitVkey(vkey);
    } catch (e) {
      return this.fail(`${what}: ${(e as Error).message}`);
    }
    const dup = this.keys.get(keyMaterial(p));
    if (dup !== undefined) this.fail(`${what}: the same public key as ${dup} (duplicates are not allowed)`);
    this.keys.set(keyMaterial(p), what);
    return p;
  }

  private newName(name: string): void {
    if (name === QUORUM_NONE) this.fail('the name "none" is predefined');
    if (this.defined.has(name)) this.fail(`the name ${name} is already defined`);
    this.defined.add(name);
  }

  private log(args: readonly string[]): void {
    if (args.length < 1 || args.length > 2) this.fail('expected: log <vkey> [<url>]');
    this.vkeyAt(args[0]!, 'log');
    this.logs.push(args[1] === undefined ? { vkey: args[0]! } : { vkey: args[0]!, url: args[1] });
  }

  private witness(args: readonly string[]): void {
    if (args.length < 2 || args.length > 3) this.fail('expected: witness <name> <vkey> [<url>]');
    const [name, vkey, url] = args as [string, string, string | undefined];
    const p = this.vkeyAt(vkey, `witness ${name}`);
    if (!WITNESS_KEY_TYPES.has(p.type))
      this.fail(`witness ${name}: key type 0x${hex2(p.type)} is not a cosignature key (0x04 or 0x06)`);
    this.newName(name);
    this.witnesses.push(url === undefined ? { name, vkey } : { name, vkey, url });
  }

  private group(args: readonly string[]): void {
    if (args.length < 3) this.fail('expected: group <name> all|any|<k> <name>... (at least one member)');
    const [name, kText, ...members] = args as [string, string, ...string[]];
    const k = this.threshold(name, kText, members.length);
    const seen = new Set<string>();
    for (const m of members) {
      if (m === QUORUM_NONE) this.fail(`group ${name}: "none" cannot be a group member`);
      if (!this.defined.has(m)) this.fail(`group ${name}: ${m} is not a witness or group defined on a preceding line`);
      if (seen.has(m)) this.fail(`group ${name}: ${m} is listed twice`);
      const earlier = this.listedIn.get(m);
      if (earlier !== undefined)
        this.fail(`group ${name}: ${m} is already a member of ${earlier} (a name may be listed in one group only)`);
      seen.add(m);
    }
    this.newName(name);
    for (const m of members) this.listedIn.set(m, `group ${name} (line ${this.lineNo})`);
    this.groups.push({ name, k, members });
  }

  private threshold(name: string, kText: string, members: number): PolicyGroup['k'] {
    if (kText === 'all' || kText === 'any') return kText;
    if (!/^[0-9]+$/.test(kText))
      this.fail(`group ${name}: threshold must be all, any or a decimal number, not ${JSON.stringify(kText)}`);
    const k = Number(kText);
    if (!(k >= 1 && k <= members))
      this.fail(`group ${name}: threshold ${kText} is not between 1 and its ${members} members`);
    return k;
  }

  private quorumLine(args: readonly string[]): void {
    if (args.length !== 1) this.fail('expected: quorum <name>');
    if (this.quorum !== undefined) this.fail('a second quorum line (a policy has exactly one)');
    if (args[0] !== QUORUM_NONE && !this.defined.has(args[0]!))
      this.fail(`quorum: ${args[0]} is not a witness or group defined on a preceding line`);
    this.quorum = args[0]!;
  }
}

/** Writes the policy as text: logs, witnesses, groups (in order), then the quorum line. */
export function formatPolicy(p: Policy): string {
  const lines: string[] = [];
  for (const l of p.logs) lines.push(['log', l.vkey, ...(l.url ? [l.url] : [])].join(' '));
  for (const w of p.witnesses) lines.push(['witness', w.name, w.vkey, ...(w.url ? [w.url] : [])].join(' '));
  for (const g of p.groups) lines.push(['group', g.name, String(g.k), ...g.members].join(' '));
  lines.push(`quorum ${p.quorum}`);
  const text = `${lines.join('\n')}\n`;
  parsePolicy(text); // never write what would not read back
  return text;
}

/** Whether the quorum needs no cosignature at all (`quorum none`). */
export const isUnwitnessed = (p: Policy): boolean => p.quorum === QUORUM_NONE;

function threshold(g: PolicyGroup): number {
  return g.k === 'all' ? g.members.length : g.k === 'any' ? 1 : g.k;
}

/**
 * Whether the witnesses named in `cosigned` (policy names of witnesses whose cosignatures
 * verified) meet the quorum: a group "is considered to witness a checkpoint if and only if
 * at least k of its n members have witnessed that checkpoint".
 */
export function quorumMet(p: Policy, cosigned: ReadonlySet<string>): boolean {
  if (p.quorum === QUORUM_NONE) return true;
  const groups = new Map(p.groups.map((g) => [g.name, g]));
  const memo = new Map<string, boolean>();
  const witnessed = (name: string): boolean => {
    const known = memo.get(name);
    if (known !== undefined) return known;
    const g = groups.get(name);
    const r = g ? g.members.filter(witnessed).length >= threshold(g) : cosigned.has(name);
    memo.set(name, r);
    return r;
  };
  return witnessed(p.quorum);
}

/**
 * The quorum in words, e.g. `2 of (w1, w2, w3)` or `all of (X: 2 of (…), Y: any of (…))`.
 * Each name is a member of one group at most (parsePolicy), so the words grow linearly; a
 * group met twice (only a policy built by hand could) is named, not spelt out again.
 */
export function describeQuorum(p: Policy): string {
  if (p.quorum === QUORUM_NONE) return 'none';
  const groups = new Map(p.groups.map((g) => [g.name, g]));
  const spelt = new Set<string>();
  const words = (name: string, top: boolean): string => {
    const g = groups.get(name);
    if (!g || spelt.has(name)) return name;
    spelt.add(name);
    const inner = `${g.k} of (${g.members.map((m) => words(m, false)).join(', ')})`;
    return top ? inner : `${name}: ${inner}`;
  };
  return words(p.quorum, true);
}

/**
 * The fewest cosignatures that can meet the quorum, for a published M-of-N figure beside
 * the policy text. Exact for every policy parsePolicy accepts (no name is in two groups);
 * capped at the number of witnesses for one built by hand that shares members.
 */
export function minimumCosigners(p: Policy): number {
  if (p.quorum === QUORUM_NONE) return 0;
  const groups = new Map(p.groups.map((g) => [g.name, g]));
  const memo = new Map<string, number>();
  const min = (name: string): number => {
    const g = groups.get(name);
    if (!g) return 1;
    const known = memo.get(name);
    if (known !== undefined) return known;
    const n = g.members
      .map(min)
      .sort((a, b) => a - b)
      .slice(0, threshold(g))
      .reduce((a, b) => a + b, 0);
    memo.set(name, n);
    return n;
  };
  return Math.min(min(p.quorum), p.witnesses.length);
}

/** The common M-of-N policy: every witness listed, a group of k over all of them (k = 0: `quorum none`). */
export function thresholdPolicy(logs: readonly PolicyLog[], witnesses: readonly PolicyWitness[], k: number): Policy {
  if (k > witnesses.length) throw new PolicyError(`a threshold of ${k} exceeds the ${witnesses.length} witnesses`);
  if (k === 0) return { logs, witnesses, groups: [], quorum: QUORUM_NONE };
  const taken = new Set(witnesses.map((w) => w.name));
  let name = 'quorum';
  for (let i = 2; taken.has(name); i++) name = `quorum-${i}`;
  return {
    logs,
    witnesses,
    groups: [{ name, k: k === witnesses.length ? 'all' : k, members: witnesses.map((w) => w.name) }],
    quorum: name,
  };
}

/** k when the policy is `quorum none` (0) or k-of-all-its-witnesses (thresholdPolicy's shape); else null. */
export function simpleThreshold(p: Policy): number | null {
  if (p.quorum === QUORUM_NONE) return 0;
  if (p.groups.length === 0) return p.witnesses.length === 1 ? 1 : null;
  const g = p.groups[p.groups.length - 1]!;
  if (p.groups.length !== 1 || g.name !== p.quorum) return null;
  const all = new Set(p.witnesses.map((w) => w.name));
  if (g.members.length !== all.size || !g.members.every((m) => all.has(m))) return null;
  return threshold(g);
}

/** A name not yet used in the policy: `base`, else `base-2`, `base-3`, …. */
function freshName(p: Policy, base: string): string {
  const taken = new Set([...p.witnesses.map((w) => w.name), ...p.groups.map((g) => g.name), QUORUM_NONE]);
  let name = base;
  for (let i = 2; taken.has(name); i++) name = `${base}-${i}`;
  return name;
}

/**
 * `p` with more cosigners (a log's tlog-mirrors: a mirror cosigns as a witness does) listed
 * as witness lines and, when k > 0, required too: `group <name> k <cosigners>`, and a quorum
 * that is p's quorum and that group. With k = 0 they are listed only, for clients to know them.
 */
export function withCosigners(p: Policy, cosigners: readonly PolicyWitness[], k: number, name: string): Policy {
  if (cosigners.length === 0) return p;
  if (k > cosigners.length) throw new PolicyError(`${k} of ${name} required, but only ${cosigners.length} listed`);
  const known = new Set(p.witnesses.map((w) => w.name));
  const clash = cosigners.find((c) => known.has(c.name));
  if (clash) throw new PolicyError(`${name}: ${clash.name} is already a witness of the policy`);
  const listed: Policy = { ...p, witnesses: [...p.witnesses, ...cosigners] };
  if (k === 0) return listed;
  const group: PolicyGroup = {
    name: freshName(listed, name),
    k: k === cosigners.length ? 'all' : k,
    members: cosigners.map((c) => c.name),
  };
  if (p.quorum === QUORUM_NONE) return { ...listed, groups: [...p.groups, group], quorum: group.name };
  const grouped: Policy = { ...listed, groups: [...p.groups, group] };
  const both: PolicyGroup = {
    name: freshName(grouped, `${p.quorum}-and-${name}`),
    k: 'all',
    members: [p.quorum, group.name],
  };
  return { ...grouped, groups: [...grouped.groups, both], quorum: both.name };
}
