import { defineConfig } from 'vitest/config';

export default defineConfig({
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
