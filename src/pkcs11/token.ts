// One token reached through a PKCS#11 module: loading the module (once per process), the
// slot the URI names, the PIN (from pin-source or STELE_PKCS11_PIN, never argv), and a
// small pool of logged-in sessions. A session that sees any error is closed and dropped,
// so the next operation opens (and logs in) a fresh one: a token that was reset, removed
// and reinserted, or timed out recovers without a restart.
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type * as P11 from 'pkcs11js';
import { Pkcs11KeyError, ckrOf } from './errors.js';
import { type Pkcs11Uri, describeUri } from './uri.js';

type Lib = P11.PKCS11;
type Handle = P11.Handle;
type Template = P11.Template;

/** The pkcs11js module, loaded on first use so nothing else needs the native addon. */
export type Pkcs11Js = typeof P11;
let binding: Pkcs11Js | undefined;
export function pkcs11js(): Pkcs11Js {
  binding ??= createRequire(import.meta.url)('pkcs11js') as Pkcs11Js;
  return binding;
}

/** Mechanisms and key types pkcs11js has no constant for (PKCS#11 3.0). */
export const CKK_EC_EDWARDS = 0x40;
export const CKM_EC_EDWARDS_KEY_PAIR_GEN = 0x1055;
export const CKM_EDDSA = 0x1057;

export const PIN_ENV = 'STELE_PKCS11_PIN';
export const MODULE_ENV = 'STELE_PKCS11_MODULE';

interface LoadedModule {
  readonly lib: Lib;
  refs: number;
}
/** C_Initialize may run once per module per process: every token of a module shares it. */
const modules = new Map<string, LoadedModule>();

function loadModule(path: string): LoadedModule {
  const have = modules.get(path);
  if (have) {
    have.refs++;
    return have;
  }
  if (!existsSync(path)) throw new Pkcs11KeyError('module', `PKCS#11 module ${path} does not exist`);
  const p = pkcs11js();
  const lib = new p.PKCS11();
  try {
    lib.load(path);
  } catch (e) {
    throw new Pkcs11KeyError('module', `cannot load PKCS#11 module ${path}: ${oneLine(e)}`);
  }
  try {
    // OS locking: signatures run on libuv's pool threads (C_SignAsync).
    lib.C_Initialize({ flags: p.CKF_OS_LOCKING_OK });
  } catch (e) {
    if (ckrOf(e) !== 'CKR_CRYPTOKI_ALREADY_INITIALIZED') {
      lib.close();
      throw new Pkcs11KeyError('module', `PKCS#11 module ${path} did not initialise: ${oneLine(e)}`);
    }
  }
  const m = { lib, refs: 1 };
  modules.set(path, m);
  return m;
}

function releaseModule(path: string): void {
  const m = modules.get(path);
  if (!m || --m.refs > 0) return;
  modules.delete(path);
  try {
    m.lib.C_Finalize();
    m.lib.close();
  } catch {
    // Finalising is best effort: the process is letting the module go.
  }
}

const oneLine = (e: unknown): string => String((e as Error)?.message ?? e).split('\n')[0]!;

/** The PIN from the URI's pin-source (a file, read once) or the environment; null if neither. */
export function resolvePin(uri: Pkcs11Uri, env: NodeJS.ProcessEnv): string | null {
  if (uri.pinSource !== undefined) {
    const src = uri.pinSource;
    const path = src.startsWith('file:')
      ? fileURLToPath(src.startsWith('file://') ? src : `file://${src.slice('file:'.length)}`)
      : src;
    if (!path.startsWith('/'))
      throw new Pkcs11KeyError(
        'config',
        `pin-source must be file:<absolute path> or an absolute path, got ${JSON.stringify(src)}`,
      );
    try {
      return readFileSync(path, 'utf8').replace(/\r?\n$/, '');
    } catch (e) {
      throw new Pkcs11KeyError(
        'config',
        `cannot read the PIN file ${path}: ${(e as NodeJS.ErrnoException).code ?? oneLine(e)}`,
      );
    }
  }
  const pin = env[PIN_ENV];
  return pin === undefined || pin === '' ? null : pin;
}

export interface TokenOptions {
  readonly uri: Pkcs11Uri;
  readonly env?: NodeJS.ProcessEnv;
  /** Sessions kept open at most (default 4). */
  readonly maxSessions?: number;
}

/** A pooled session, with the object handles found through it. */
export interface Session {
  readonly handle: Handle;
  readonly found: Map<string, Handle>;
}

export class Token {
  private readonly idle: Session[] = [];
  private readonly waiters: ((s: Session | null) => void)[] = [];
  private open = 0;
  private closed = false;
  /** Sessions opened, and operations that failed (each discarding its session). */
  readonly stats = { sessionsOpened: 0, sessionErrors: 0 };

  private constructor(
    readonly lib: Lib,
    private readonly modulePath: string,
    private readonly slot: Handle,
    /** The token's label, for messages. */
    readonly label: string,
    private readonly pin: string | null,
    private readonly maxSessions: number,
    readonly p: Pkcs11Js,
  ) {}

  /** Loads the module, finds the token and logs in once (a wrong PIN fails here, at start). */
  static open(o: TokenOptions): Token {
    const env = o.env ?? process.env;
    const modulePath = o.uri.modulePath ?? env[MODULE_ENV];
    if (!modulePath)
      throw new Pkcs11KeyError(
        'config',
        `no PKCS#11 module: add module-path=<library> to the URI or set ${MODULE_ENV}`,
      );
    const pin = resolvePin(o.uri, env);
    const mod = loadModule(modulePath);
    try {
      const { slot, label, loginRequired } = findSlot(mod.lib, o.uri, modulePath);
      if (loginRequired && pin === null)
        throw new Pkcs11KeyError(
          'pin',
          `token "${label}" needs a PIN: give pin-source=file:<path> in the URI or set ${PIN_ENV}`,
        );
      const token = new Token(
        mod.lib,
        modulePath,
        slot,
        label,
        loginRequired ? pin : null,
        o.maxSessions ?? 4,
        pkcs11js(),
      );
      token.release(token.openSession());
      return token;
    } catch (e) {
      releaseModule(modulePath);
      throw e;
    }
  }

  private openSession(): Session {
    const p = this.p;
    let handle: Handle;
    try {
      handle = this.lib.C_OpenSession(this.slot, p.CKF_SERIAL_SESSION | p.CKF_RW_SESSION);
    } catch (e) {
      throw new Pkcs11KeyError('device', `cannot open a session on token "${this.label}": ${oneLine(e)}`);
    }
    this.open++;
    this.stats.sessionsOpened++;
    if (this.pin !== null) {
      try {
        this.lib.C_Login(handle, p.CKU_USER, this.pin);
      } catch (e) {
        const ckr = ckrOf(e);
        if (ckr !== 'CKR_USER_ALREADY_LOGGED_IN') {
          this.discard({ handle, found: new Map() });
          if (ckr === 'CKR_PIN_INCORRECT') throw new Pkcs11KeyError('pin', `wrong PIN for token "${this.label}"`);
          if (ckr === 'CKR_PIN_LOCKED')
            throw new Pkcs11KeyError(
              'pin',
              `the PIN of token "${this.label}" is locked (too many wrong tries): unlock it with the SO PIN`,
            );
          throw new Pkcs11KeyError('pin', `cannot log in to token "${this.label}": ${ckr ?? oneLine(e)}`);
        }
      }
    }
    return { handle, found: new Map() };
  }

  private discard(s: Session): void {
    this.open--;
    try {
      this.lib.C_CloseSession(s.handle);
    } catch {
      // Already gone with the device: nothing to close.
    }
  }

  private release(s: Session): void {
    const next = this.waiters.shift();
    if (next) next(s);
    else this.idle.push(s);
  }

  private async acquire(): Promise<Session> {
    if (this.closed) throw new Pkcs11KeyError('device', `token "${this.label}" is closed`);
    const s = this.idle.pop();
    if (s) return s;
    if (this.open < this.maxSessions) return this.openSession();
    const got = await new Promise<Session | null>((resolve) => this.waiters.push(resolve));
    // A waiter woken with null lost its session to an error: it may open its own.
    return got ?? this.openSession();
  }

  /**
   * Runs `fn` on a pooled session. If it throws, the session is closed and dropped, and the
   * error passes through as a Pkcs11KeyError ('device' unless it already has a kind). A
   * timed-out operation's session is closed only once the module has finished with it.
   */
  async withSession<T>(fn: (s: Session) => Promise<T> | T): Promise<T> {
    const s = await this.acquire();
    try {
      const out = await fn(s);
      this.release(s);
      return out;
    } catch (e) {
      this.stats.sessionErrors++;
      if (!(e instanceof TimedOut)) this.discard(s);
      else void e.settled.finally(() => this.discard(s));
      const w = this.waiters.shift();
      if (w) w(null);
      if (e instanceof Pkcs11KeyError) throw e;
      throw new Pkcs11KeyError('device', `token "${this.label}": ${oneLine(e)}`);
    }
  }

  /** The same on the calling thread, for callers that cannot wait (one idle session or a new one). */
  withSessionSync<T>(fn: (s: Session) => T): T {
    if (this.closed) throw new Pkcs11KeyError('device', `token "${this.label}" is closed`);
    const s = this.idle.pop() ?? this.openSession();
    try {
      const out = fn(s);
      this.release(s);
      return out;
    } catch (e) {
      this.stats.sessionErrors++;
      this.discard(s);
      if (e instanceof Pkcs11KeyError) throw e;
      throw new Pkcs11KeyError('device', `token "${this.label}": ${oneLine(e)}`);
    }
  }

  /** The one object matching `template` (cached per session under `key`). */
  findOne(s: Session, key: string, template: Template, what: string): Handle {
    const cached = s.found.get(key);
    if (cached) return cached;
    const found = this.findAll(s, template, 2);
    if (found.length === 0) throw new Pkcs11KeyError('object', `token "${this.label}" has no ${what}`);
    if (found.length > 1)
      throw new Pkcs11KeyError('object', `token "${this.label}" has more than one ${what}: name it by object= and id=`);
    s.found.set(key, found[0]!);
    return found[0]!;
  }

  findAll(s: Session, template: Template, max = 64): Handle[] {
    this.lib.C_FindObjectsInit(s.handle, template);
    try {
      return this.lib.C_FindObjects(s.handle, max);
    } finally {
      this.lib.C_FindObjectsFinal(s.handle);
    }
  }

  /** Whether the token still answers (tells a refused operation from a failed device). */
  healthy(): boolean {
    try {
      this.lib.C_GetTokenInfo(this.slot);
      return true;
    } catch {
      return false;
    }
  }

  /** Closes every session and lets the module go once no other token uses it. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const s of this.idle.splice(0)) this.discard(s);
    for (const w of this.waiters.splice(0)) w(null);
    releaseModule(this.modulePath);
  }
}

/** Thrown by `bounded` when the token does not answer in time; carries the still-running call. */
export class TimedOut extends Pkcs11KeyError {
  constructor(
    message: string,
    readonly settled: Promise<unknown>,
  ) {
    super('device', message);
  }
}

/** `op`, or TimedOut after `ms`: a hung token fails the caller instead of stalling it. */
export function bounded<T>(op: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new TimedOut(
            `${what} did not answer within ${ms} ms`,
            op.catch(() => undefined),
          ),
        ),
      ms,
    );
  });
  return Promise.race([op, late]).finally(() => clearTimeout(timer));
}

function findSlot(
  lib: Lib,
  uri: Pkcs11Uri,
  modulePath: string,
): { slot: Handle; label: string; loginRequired: boolean } {
  const p = pkcs11js();
  const seen: string[] = [];
  let slots: Handle[];
  try {
    slots = lib.C_GetSlotList(true);
  } catch (e) {
    throw new Pkcs11KeyError('module', `PKCS#11 module ${modulePath} cannot list its slots: ${oneLine(e)}`);
  }
  for (const slot of slots) {
    const info = lib.C_GetTokenInfo(slot);
    const label = info.label.trimEnd();
    if ((info.flags & p.CKF_TOKEN_INITIALIZED) === 0) continue;
    seen.push(label);
    if (uri.token !== undefined && uri.token !== label) continue;
    if (uri.serial !== undefined && uri.serial !== info.serialNumber.trimEnd()) continue;
    if (uri.manufacturer !== undefined && uri.manufacturer !== info.manufacturerID.trimEnd()) continue;
    if (uri.model !== undefined && uri.model !== info.model.trimEnd()) continue;
    if (uri.slotId !== undefined && uri.slotId !== slot.readUIntLE(0, Math.min(6, slot.length))) continue;
    if ((info.flags & p.CKF_USER_PIN_LOCKED) !== 0)
      throw new Pkcs11KeyError(
        'pin',
        `the PIN of token "${label}" is locked (too many wrong tries): unlock it with the SO PIN`,
      );
    return { slot, label, loginRequired: (info.flags & p.CKF_LOGIN_REQUIRED) !== 0 };
  }
  const known = seen.length
    ? `; tokens present: ${seen.map((l) => JSON.stringify(l)).join(', ')}`
    : '; the module has no initialised token';
  const { object: _o, id: _i, type: _t, ...tokenPart } = uri;
  throw new Pkcs11KeyError('token', `no token matches ${describeUri(tokenPart)}${known}`);
}
