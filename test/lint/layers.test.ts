// The layers of docs/architecture.md hold and cannot drift: the table names every folder of
// src/ once; biome.jsonc's generated rules are the table's (test/lint/layers.ts); and the
// linter, run on a scratch copy with the repository's configuration, refuses a planted
// upward import, an import within a layer, and an import cycle, and passes what the table allows.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/vectors.js';
import { layerOverrides, readLayerTable } from './layers.js';
import { lintErrors } from './scratch-lint.js';

/** biome.jsonc as data: its `//` comments dropped (no string in it holds `//`). */
function biomeConfig(): { overrides: Array<{ includes: string[] }> } {
  const text = readFileSync(path.join(repoRoot, 'biome.jsonc'), 'utf8').replace(/^\s*\/\/.*$/gm, '');
  return JSON.parse(text.replace(/,(\s*[}\]])/g, '$1'));
}

describe('layers', () => {
  const table = readLayerTable();

  it('the table names every folder of src/ exactly once', () => {
    const folders = readdirSync(path.join(repoRoot, 'src')).filter((f) =>
      statSync(path.join(repoRoot, 'src', f)).isDirectory(),
    );
    const named = table.layers.flatMap((l) => l.folders);
    expect(new Set(named).size).toBe(named.length);
    expect([...named].sort()).toEqual([...folders].sort());
    // No loose files at src/: every module has a folder, so a layer.
    expect(readdirSync(path.join(repoRoot, 'src')).filter((f) => f.endsWith('.ts'))).toEqual([]);
  });

  it("biome.jsonc's layer rules are the table's (npx tsx test/lint/layers.ts --write regenerates them)", () => {
    const generated = layerOverrides(table) as Array<{ includes: string[] }>;
    const inConfig = biomeConfig().overrides.filter((o) => generated.some((g) => g.includes[0] === o.includes[0]));
    expect(inConfig).toEqual(generated);
  });

  it('refuses an upward import, an import within a layer and a cycle; passes what the table allows', async () => {
    const r = await lintErrors({
      'src/store/upward.ts': "import { SERVE_DEFAULTS } from '../serve/config.js';\nexport const a = SERVE_DEFAULTS;\n",
      'src/api/sideways.ts': "import { x } from '../control/app.js';\nexport const a = x;\n",
      'src/explorer/pages/server.ts': "import { x } from '../../read/reader.js';\nexport const a = x;\n",
      'src/mirror/allowed.ts': "import { x } from '../witness/witness.js';\nexport const a = x;\n",
      'src/api/down.ts': "import { x } from '../sequencer/contract.js';\nexport const a = x;\n",
      'src/read/cycle-a.ts': "import { b } from './cycle-b.js';\nexport const a = () => b();\n",
      'src/read/cycle-b.ts': "import { a } from './cycle-a.js';\nexport const b = () => a();\n",
    });
    expect(r.get('src/store/upward.ts')).toEqual([
      expect.stringMatching(/noRestrictedImports: src\/store \(layer 1\) imports only lower layers/),
    ]);
    expect(r.get('src/api/sideways.ts')).toEqual([
      expect.stringMatching(/noRestrictedImports: src\/api \(layer 7\) imports only lower layers.*control/),
    ]);
    expect(r.get('src/explorer/pages/server.ts')).toEqual([
      expect.stringMatching(/noRestrictedImports: src\/explorer \(layer 10\)/),
    ]);
    expect(r.get('src/mirror/allowed.ts')).toEqual([]);
    expect(r.get('src/api/down.ts')).toEqual([]);
    expect(r.get('src/read/cycle-a.ts')).toEqual([expect.stringMatching(/noImportCycles/)]);
  }, 60_000);
});
