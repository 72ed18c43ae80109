// Builds the explorer (src/explorer, a static single-page app) into dist/explorer with
// relative URLs (base './'), so the same files work when served by `stele serve` at /, from
// the log's bucket/CDN next to the tiles, or from a mirror directory.
import { fileURLToPath } from 'node:url';
import { defineConfig, type Plugin } from 'vite';

/** The page may only talk to its own origin: no third-party requests, no inline code. */
export const EXPLORER_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'";

const csp = (): Plugin => ({
  name: 'stele-explorer-csp',
  apply: 'build',
  transformIndexHtml: () => [
    {
      tag: 'meta',
      attrs: { 'http-equiv': 'Content-Security-Policy', content: EXPLORER_CSP },
      injectTo: 'head-prepend',
    },
  ],
});

export default defineConfig({
  root: fileURLToPath(new URL('./src/explorer', import.meta.url)),
  base: './',
  publicDir: false,
  plugins: [csp()],
  build: {
    outDir: fileURLToPath(new URL('./dist/explorer', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    assetsDir: 'assets',
    sourcemap: true,
    modulePreload: { polyfill: false },
    reportCompressedSize: true,
  },
  server: { host: '127.0.0.1' },
  // The page uses the verifier package from its source, so the core modules it shares with the
  // rest of the page are bundled once.
  resolve: { alias: { '@stele/verify': fileURLToPath(new URL('./packages/verify/src/index.ts', import.meta.url)) } },
});
