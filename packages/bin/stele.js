#!/usr/bin/env node
// `stele` in a clone of the repository: `npm ci` links this file into node_modules/.bin (a
// workspace's bin), where `npx stele` finds it and runs it at once. Without it npx would copy
// the clone into its cache as a dependency and build it again there (minutes, silently).
// The CLI itself is the root package's build: dist/cli, the bundle of packages/bin/bundle.ts
// (npm ci runs the root package's `prepare`, which makes it).
import '../../dist/cli/main.js';
