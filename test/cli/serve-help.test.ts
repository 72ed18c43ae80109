// `stele serve --help` lists every STELE_* variable the server reads, generated from the table
// in src/serve/config.ts: a variable added to the config reader, or to the AWS backend's reader,
// without a help line fails here. STELE_RECONFIGURE is --reconfigure's env form, and is
// refused in a config file (a file would keep it set for every later start).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServeConfig } from '../../src/serve/config.js';
import { Sandbox, ensureBuilt } from '../helpers/cli.js';

beforeAll(ensureBuilt, 180_000);
const sb = new Sandbox('stele-serve-help-');
afterAll(() => sb.cleanup());

/** The STELE_* names a source file mentions (a trailing `_` is a family, e.g. STELE_CONTROL_*). */
const variablesIn = (path: string) => [
  ...new Set(readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8').match(/STELE_[A-Z0-9_]+/g) ?? []),
];

describe('stele serve --help', () => {
  it('lists, one line each, every STELE_ variable src/serve/config.ts and the AWS backend read', async () => {
    const r = await sb.run(['serve', '--help']);
    expect(r.code, r.stderr).toBe(0);
    const env = r.stdout.slice(r.stdout.indexOf('Environment'));
    const names = [...variablesIn('src/serve/config.ts'), ...variablesIn('src/serve/aws-log.ts')];
    expect(names).toContain('STELE_WITNESS_POLICY');
    expect(names).toContain('STELE_S3_BUCKET');
    for (const name of names) {
      if (name.endsWith('_')) expect(env, name).toContain(`${name}*`);
      else expect(env, name).toMatch(new RegExp(`^  ${name} +\\S`, 'm'));
    }
  });

  it('names in its option descriptions only variables the server reads', async () => {
    const r = await sb.run(['serve', '--help']);
    expect(r.code, r.stderr).toBe(0);
    // Commander wraps descriptions at spaces: joined again, each "(env NAME" is whole.
    const options = r.stdout.slice(0, r.stdout.indexOf('Environment')).replace(/\s+/g, ' ');
    const read = new Set(
      ['src/serve/config.ts', 'src/serve/aws-log.ts', 'src/pkcs11/token.ts'].flatMap((f) => variablesIn(f)),
    );
    const named = [...options.matchAll(/env (STELE_[A-Z0-9_]+)/g)].map((m) => m[1]!);
    expect(named).toContain('STELE_ORIGIN');
    for (const name of named) expect(read, name).toContain(name);
  });
});

describe('STELE_RECONFIGURE', () => {
  it('is --reconfigure from the environment, and no config file setting', () => {
    expect(resolveServeConfig({}, { STELE_RECONFIGURE: 'true' }).reconfigure).toBe(true);
    expect(resolveServeConfig({}, {}).reconfigure).toBeUndefined();
    const file = join(sb.work, 'stele.toml');
    writeFileSync(file, '[server]\nreconfigure = true\n');
    expect(() => resolveServeConfig({ config: file }, {})).toThrow(/unknown setting \[server\]\.reconfigure/);
  });
});
