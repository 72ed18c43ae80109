// `stele mirror serve` as a subprocess, for the tests that push a log to a real mirror process.
import { type ChildProcess, spawn } from 'node:child_process';
import { CLI } from '../helpers/cli.js';

export interface RunningMirrorCli {
  url: string;
  vkey: string;
  stop(): Promise<void>;
}

/** `stele mirror serve --json` as a subprocess, ready once it prints its line. */
export async function startMirrorCli(dataDir: string, port: number, logSpec: string): Promise<RunningMirrorCli> {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith('STELE_')) delete env[k];
  const proc: ChildProcess = spawn(
    process.execPath,
    [
      CLI,
      'mirror',
      'serve',
      '--data-dir',
      dataDir,
      '--name',
      'mirror.test/m1',
      '--log',
      logSpec,
      '--port',
      String(port),
      '--log-level',
      'warn',
      '--json',
    ],
    {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stderr = '';
  proc.stderr!.on('data', (d) => (stderr += d));
  const info = await new Promise<{ url: string; vkey: string }>((resolve, reject) => {
    let buf = '';
    proc.stdout!.on('data', (d) => {
      buf += d;
      if (buf.includes('\n')) resolve(JSON.parse(buf.slice(0, buf.indexOf('\n'))) as { url: string; vkey: string });
    });
    proc.once('exit', (code) => reject(new Error(`stele mirror serve exited with ${code}: ${stderr}`)));
  });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  return {
    ...info,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    },
  };
}
