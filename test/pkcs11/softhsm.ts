// A real PKCS#11 module for the tests: SoftHSM2 (Debian's softhsm2, installed by .ci/run),
// with its token directory in a scratch directory. Tokens are made with softhsm2-util (the
// test harness may put PINs on its own command lines; Stele only ever reads them from a
// file or STELE_PKCS11_PIN). SoftHSM reads SOFTHSM2_CONF when a process first loads it, so
// a test file sets it once, before anything opens a token, and its subprocesses inherit it.
import { execFileSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { mkdirSync } from 'node:fs';
import { scratchDir } from '../helpers/tmp.js';

export const SOFTHSM_MODULE = '/usr/lib/softhsm/libsofthsm2.so';

export interface TestToken {
  readonly label: string;
  readonly pin: string;
  readonly pinFile: string;
  /** The URI of `object` in this token: module path and pin-source included. */
  uri(object: string, query?: Record<string, string>): string;
}

export interface SoftHsm {
  readonly dir: string;
  readonly conf: string;
  token(label: string, pin?: string): TestToken;
}

/** A fresh SoftHSM2 configuration for this test file; sets SOFTHSM2_CONF for it and its children. */
export function softHsm(): SoftHsm {
  if (!existsSync(SOFTHSM_MODULE))
    throw new Error(`${SOFTHSM_MODULE} is missing: apt-get install softhsm2 (.ci/run does)`);
  const dir = scratchDir('stele-softhsm-');
  const tokens = join(dir, 'tokens');
  mkdirSync(tokens, { mode: 0o700 });
  const conf = join(dir, 'softhsm2.conf');
  writeFileSync(
    conf,
    `directories.tokendir = ${tokens}\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n`,
  );
  process.env.SOFTHSM2_CONF = conf;
  return {
    dir,
    conf,
    token(label, pin = `pin-${label}-4821`) {
      execFileSync(
        'softhsm2-util',
        ['--init-token', '--free', '--label', label, '--so-pin', 'so-pin-93175', '--pin', pin],
        { env: { ...process.env, SOFTHSM2_CONF: conf }, stdio: 'pipe' },
      );
      const pinFile = join(dir, `${label}.pin`);
      writeFileSync(pinFile, `${pin}\n`, { mode: 0o600 });
      return {
        label,
        pin,
        pinFile,
        uri(object, query = {}) {
          const q = new URLSearchParams({ 'module-path': SOFTHSM_MODULE, 'pin-source': `file:${pinFile}`, ...query });
          return `pkcs11:token=${encodeURIComponent(label)};object=${encodeURIComponent(object)}?${decodeURIComponent(q.toString())}`;
        },
      };
    },
  };
}
