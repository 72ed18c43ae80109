// The README's commands run as written: the blocks "Anchor and verify a file" and "Mirror and
// audit offline" are read from README.md, and every `npx stele` line is run in order (as
// `node dist/cli/main.js`, the form the README gives for a clone) against a fresh log on the
// README's endpoint settings, with its placeholders filled from what the log printed. Each
// must exit 0; a command the README changes is run as the README has it, so the two cannot drift.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServe, Sandbox, ensureBuilt, startServe } from '../helpers/cli.js';
import { repoRoot } from '../helpers/vectors.js';

/** The `npx stele …` lines of the first sh block after `heading`, comments dropped, as argv. */
function readmeCommands(heading: string): string[][] {
  const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
  const from = readme.indexOf(heading);
  expect(from, heading).toBeGreaterThan(0);
  const blocks = [...readme.slice(from).matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const block = blocks.find((b) => b.includes('npx stele'))!;
  return block
    .split('\n')
    .filter((l) => l.startsWith('npx stele '))
    .map((l) => l.replace(/\s+#.*$/, '').trim())
    .map((l) => [...l.slice('npx stele '.length).matchAll(/'[^']*'|\S+/g)].map((m) => m[0].replace(/^'|'$/g, '')));
}

describe("the README's commands, as written", () => {
  let sb: Sandbox;
  let serve: RunningServe;

  beforeAll(async () => {
    await ensureBuilt();
    sb = new Sandbox('stele-readme-');
    // The README's endpoint is http://127.0.0.1:8080; the test's log listens on a free port.
    serve = await startServe({ dataDir: join(sb.root, 'data'), origin: 'readme.test/log' });
    sb.file('release-1.2.3.tgz', 'the release the README anchors\n');
  }, 120_000);

  afterAll(async () => {
    await serve?.stop();
    sb?.cleanup();
  });

  it('anchor and verify a file, then mirror and audit it offline', async () => {
    const fill = async (argv: string[]): Promise<string[]> => {
      const out: string[] = [];
      for (const a of argv) {
        if (a === 'http://127.0.0.1:8080') out.push(serve.url);
        else if (a === '<key_id>') out.push(serve.keyId);
        else if (a === '<entry_id>') {
          const got = await sb.json(['ledger', 'get', '--artifact', 'release-1.2.3.tgz', '--scope', 'demo']);
          out.push((got.out.matches as Array<{ entry: { id: string } }>)[0]!.entry.id);
        } else out.push(a);
      }
      return out;
    };
    const ran: string[] = [];
    for (const argv of [
      ...readmeCommands('## Anchor and verify a file'),
      ...readmeCommands('## Mirror and audit offline'),
    ]) {
      const args = await fill(argv);
      const r = await sb.run(args);
      ran.push(args[0] === 'ledger' ? `${args[0]} ${args[1]}` : args[0]!);
      expect(r.code, `stele ${args.join(' ')}\n${r.stdout}\n${r.stderr}`).toBe(0);
    }
    expect(ran).toEqual([
      'ledger init',
      'ledger anchor',
      'ledger verify',
      'ledger proof',
      'ledger consistency',
      'ledger checkpoint',
      'verify',
      'ledger get',
      'ledger get',
      'ledger status',
      'ledger mirror',
      'ledger verify',
      'ledger audit',
    ]);
  }, 180_000);
});
