// `stele --help` replayed: the top-level help as commander last rendered it, kept per help
// width in ~/.cache/stele (XDG_CACHE_HOME), so that the most asked-for help loads no library
// at all (commander and the command table cost a run about 15 ms of CPU). The file's name
// holds the width and the modification time of this module's file: every build of the CLI
// writes its files anew (packages/bin/bundle.ts), so a rebuilt CLI renders the help anew.
// Node's own modules only: cli/main.ts loads this before anything else.
import { mkdirSync, readFileSync, readdirSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join } from 'node:path';

const PREFIX = 'help-';

/** True for `stele --help` and `stele -h`: the one help replayed. */
export function isTopHelp(args: readonly string[]): boolean {
  return args.length === 1 && (args[0] === '--help' || args[0] === '-h');
}

function cacheFile(): string | null {
  try {
    // Commander wraps to the terminal's width, else 80 columns.
    const width = process.stdout.isTTY ? process.stdout.columns : 80;
    const build = Math.trunc(statSync(new URL(import.meta.url)).mtimeMs).toString(36);
    const xdg = process.env.XDG_CACHE_HOME;
    const dir = join(xdg && isAbsolute(xdg) ? xdg : join(homedir(), '.cache'), 'stele');
    return join(dir, `${PREFIX}${width}-${build}.txt`);
  } catch {
    return null;
  }
}

/** Prints the kept help and returns true, or returns false when there is none for this build and width. */
export function replayHelp(): boolean {
  const file = cacheFile();
  if (!file) return false;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return false;
  }
  process.stdout.write(text);
  return true;
}

/** Keeps `text` for the next `stele --help` (replacing an older build's); never fails the run. */
export function keepHelp(text: string): void {
  const file = cacheFile();
  if (!file || text === '') return;
  try {
    const dir = dirname(file);
    mkdirSync(dir, { recursive: true });
    for (const old of readdirSync(dir))
      if (old.startsWith(PREFIX) && !file.endsWith(`-${old.split('-').slice(2).join('-')}`)) unlinkSync(join(dir, old));
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, text);
    renameSync(tmp, file);
  } catch {
    // a cache that cannot be written is no cache: the next run renders the help again
  }
}
