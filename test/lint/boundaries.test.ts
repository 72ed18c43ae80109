// The import boundaries of biome.jsonc hold: probe files that cross them, linted with the
// repository's own configuration in a scratch copy, are refused with the boundary's message,
// and probes that keep to them pass. (`npm run lint` applies the same rules to the real tree.)
import { describe, expect, it } from 'vitest';
import { lintErrors } from './scratch-lint.js';

const lint = lintErrors;
const messages = (ms: string[] | undefined) => ms ?? [];

describe('lint: import boundaries of biome.jsonc', () => {
  it('src/core imports no Node built-in, no Buffer or process, and nothing above it', async () => {
    const r = await lint({
      'src/core/builtin.ts': "import { createHash } from 'node:crypto';\nexport const a = createHash;\n",
      'src/core/bare.ts': "import { readFileSync } from 'fs';\nexport const a = readFileSync;\n",
      'src/core/upward.ts': "import { LogReader } from '../reader.js';\nexport const a = LogReader;\n",
      'src/core/buffer.ts': "export const a = Buffer.from('x');\nexport const b = process.env;\n",
      'src/core/fine.ts':
        "import { sha256 } from '@noble/hashes/sha2.js';\nimport { leafHash } from './hash.js';\nexport const a = [sha256, leafHash];\n",
    });
    expect(messages(r.get('src/core/builtin.ts'))).toEqual([
      expect.stringMatching(/noRestrictedImports: src\/core is browser-safe: no Node built-ins/),
    ]);
    expect(messages(r.get('src/core/bare.ts'))).toEqual([
      expect.stringMatching(/noRestrictedImports: src\/core is browser-safe: no Node built-ins/),
    ]);
    expect(messages(r.get('src/core/upward.ts'))).toEqual([
      expect.stringMatching(/noRestrictedImports: src\/core is the bottom layer/),
    ]);
    expect(messages(r.get('src/core/buffer.ts'))).toEqual([
      expect.stringMatching(/^lint\/style\/noRestrictedGlobals: /),
      expect.stringMatching(/^lint\/style\/noRestrictedGlobals: /),
    ]);
    expect(messages(r.get('src/core/fine.ts'))).toEqual([]);
  });

  it('src/core/verify keeps the core boundary one level down; @stele/verify reaches only into src/core', async () => {
    const r = await lint({
      'src/core/verify/upward.ts': "import { LogReader } from '../../reader.js';\nexport const a = LogReader;\n",
      'src/core/verify/builtin.ts': "import { readFileSync } from 'node:fs';\nexport const a = readFileSync;\n",
      'src/core/verify/fine.ts':
        "import { leafHash } from '../hash.js';\nimport { RULES } from './rules.js';\nexport const a = [leafHash, RULES];\n",
      'packages/verify/src/client.ts':
        "import { LogReader } from '../../../src/reader.js';\nexport const a = LogReader;\n",
      'packages/verify/src/cli.ts': "import { main } from '../../../cli/main.js';\nexport const a = main;\n",
      'packages/verify/src/builtin.ts': "import { createHash } from 'node:crypto';\nexport const a = createHash;\n",
      'packages/verify/src/buffer.ts': "export const a = Buffer.from('x');\n",
      'packages/verify/src/fine.ts':
        "import { leafHash } from '../../../src/core/hash.js';\nimport { RULES } from '../../../src/core/verify/index.js';\nexport const a = [leafHash, RULES];\n",
    });
    expect(messages(r.get('src/core/verify/upward.ts'))).toEqual([
      expect.stringMatching(/noRestrictedImports: src\/core is the bottom layer/),
    ]);
    expect(messages(r.get('src/core/verify/builtin.ts'))).toEqual([
      expect.stringMatching(/noRestrictedImports: src\/core is browser-safe/),
    ]);
    expect(messages(r.get('src/core/verify/fine.ts'))).toEqual([]);
    const onlyCore = /noRestrictedImports: @stele\/verify is built from src\/core alone/;
    expect(messages(r.get('packages/verify/src/client.ts'))).toEqual([expect.stringMatching(onlyCore)]);
    expect(messages(r.get('packages/verify/src/cli.ts'))).toEqual([expect.stringMatching(onlyCore)]);
    expect(messages(r.get('packages/verify/src/builtin.ts'))).toEqual([
      expect.stringMatching(/noRestrictedImports: @stele\/verify is browser-safe/),
    ]);
    expect(messages(r.get('packages/verify/src/buffer.ts'))).toEqual([
      expect.stringMatching(/^lint\/style\/noRestrictedGlobals: /),
    ]);
    expect(messages(r.get('packages/verify/src/fine.ts'))).toEqual([]);
  });

  it('outside src/sequencer, sequencer.ts is imported only for the Sequencer class; its vocabulary comes from contract.ts', async () => {
    const r = await lint({
      'src/api/vocabulary.ts':
        "import { PoolFullError } from '../sequencer/sequencer.js';\nexport const a = PoolFullError;\n",
      'src/api/type-only.ts':
        "import type { AnchorReceipt } from '../sequencer/sequencer.js';\nexport type A = AnchorReceipt;\n",
      'test/deep.test.ts':
        "import { Sequencer, SequencerStoppedError } from '../src/sequencer/sequencer.js';\nexport const a = [Sequencer, SequencerStoppedError];\n",
      'src/log/root.ts': "import { Sequencer } from '../sequencer/sequencer.js';\nexport const a = Sequencer;\n",
      'src/api/contract.ts':
        "import { PoolFullError, type AnchorReceipt } from '../sequencer/contract.js';\nexport const a = PoolFullError;\nexport type A = AnchorReceipt;\n",
      'src/sequencer/inside.ts': "import { PoolFullError } from './sequencer.js';\nexport const a = PoolFullError;\n",
    });
    const contract = /noRestrictedImports: Import the sequencer's types and errors from src\/sequencer\/contract\.ts/;
    expect(messages(r.get('src/api/vocabulary.ts'))).toEqual([expect.stringMatching(contract)]);
    expect(messages(r.get('src/api/type-only.ts'))).toEqual([expect.stringMatching(contract)]);
    expect(messages(r.get('test/deep.test.ts'))).toEqual([expect.stringMatching(contract)]);
    expect(messages(r.get('src/log/root.ts'))).toEqual([]);
    expect(messages(r.get('src/api/contract.ts'))).toEqual([]);
    expect(messages(r.get('src/sequencer/inside.ts'))).toEqual([]);
  });

  it('noExplicitAny is an error', async () => {
    const r = await lint({ 'src/api/any.ts': 'export function f(x: any): number {\n  return x;\n}\n' });
    expect(messages(r.get('src/api/any.ts'))).toEqual([expect.stringMatching(/^lint\/suspicious\/noExplicitAny: /)]);
  });
});
