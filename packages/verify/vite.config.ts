// Builds the package: one ES module of the verifier (src/index.ts and the log's core modules it
// reaches, nothing else), with its runtime dependencies left as imports.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  publicDir: false,
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    minify: false,
    lib: { entry: 'src/index.ts', formats: ['es'], fileName: () => 'index.js' },
    rollupOptions: { external: [/^@noble\//, 'canonicalize'] },
  },
});
