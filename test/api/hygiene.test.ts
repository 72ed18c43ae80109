// Storage hygiene over real HTTP: a symlink planted in the public directory (at a tile path,
// or as a directory on the way to one) is a 404, never the file it points to; temporary
// files left by a crashed write are removed when the log opens and never served.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { scratchDir } from '../helpers/tmp.js';
import { digestOf, postAnchor, startTestServer } from './server.js';

const deadPid = () =>
  spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();

async function get(url: string): Promise<{ status: number; text: string }> {
  const res = await fetch(url);
  return { status: res.status, text: await res.text() };
}

describe('the public directory of a local log', () => {
  it('answers 404 for a symlink at a tile path and for a tile under a symlinked directory, never their targets', async () => {
    const srv = await startTestServer();
    try {
      expect((await postAnchor(srv.url, { digest: digestOf(1) })).status).toBe(201);
      const log = join(srv.dataDir, 'log');
      // The route itself serves real tiles.
      expect((await get(`${srv.url}/tile/0/000.p/1`)).status).toBe(200);

      // The case: a tile path linked to the private key.
      mkdirSync(join(log, 'tile/0/x999'), { recursive: true });
      symlinkSync(join(srv.dataDir, 'private', 'log.key'), join(log, 'tile/0/x999/999'));
      const key = await get(`${srv.url}/tile/0/x999/999`);
      expect(key.status).toBe(404);
      expect(key.text).not.toContain('PRIVATE+KEY');

      // A directory on the way linked elsewhere: the regular file behind it is not served either.
      const outside = scratchDir('stele-outside-');
      writeFileSync(join(outside, '999'), 'SECRET');
      symlinkSync(outside, join(log, 'tile/0/x998'));
      const viaDir = await get(`${srv.url}/tile/0/x998/999`);
      expect(viaDir.status).toBe(404);
      expect(viaDir.text).not.toContain('SECRET');

      // Nor is a symlink to a regular file of the log itself (only regular files are objects).
      symlinkSync(join(log, 'tile/0/000.p/1'), join(log, 'tile/0/x999/998'));
      expect((await get(`${srv.url}/tile/0/x999/998`)).status).toBe(404);
    } finally {
      await srv.close();
    }
  });

  it('removes the temporary files of dead writers when the log opens, keeps a live one, and serves none', async () => {
    const dataDir = scratchDir('stele-api-');
    let srv = await startTestServer({ dataDir });
    expect((await postAnchor(srv.url, { digest: digestOf(1) })).status).toBe(201);
    await srv.close();

    const dead = deadPid();
    const leftovers = [
      `log/tile/0/000.p/2.tmp-${dead}-0123456789ab`,
      `log/tile/entries/000.tmp-${dead}-0123456789ab`,
      `private/lock.json.tmp-${dead}-0123456789ab`,
    ];
    for (const f of leftovers) writeFileSync(join(dataDir, f), 'half a tile');
    // A process still alive may be about to link its temporary file: it stays.
    const live = `log/tile/0/000.p/3.tmp-${process.pid}-0123456789ab`;
    writeFileSync(join(dataDir, live), 'in progress');

    srv = await startTestServer({ dataDir });
    try {
      for (const f of leftovers) expect(existsSync(join(dataDir, f)), f).toBe(false);
      expect(existsSync(join(dataDir, live))).toBe(true);
      expect(readdirSync(join(dataDir, 'log/tile/0/000.p')).sort()).toEqual(['1', '3.tmp-' + live.split('.tmp-')[1]]);
      expect((await get(`${srv.url}/tile/0/000.p/3.tmp-${process.pid}-0123456789ab`)).status).toBe(404);
      // The log goes on from where it was.
      expect((await postAnchor(srv.url, { digest: digestOf(2) })).body.leafIndex).toBe(1);
    } finally {
      await srv.close();
    }
  });
});
