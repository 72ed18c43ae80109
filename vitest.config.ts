import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  // Tests read the verifier package from its source (test/packages/verify.test.ts installs the packed one).
  resolve: { alias: { '@stele/verify': fileURLToPath(new URL('./packages/verify/src/index.ts', import.meta.url)) } },
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // The JSON report lets .ci/run print a plain "N passed, M failed" closing line.
    reporters: ['default', 'json'],
    outputFile: { json: '.scratch/vitest-report.json' },
  },
});
