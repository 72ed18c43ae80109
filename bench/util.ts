// Shared helpers for the benchmarks: figure lines, percentiles, RSS sampling, quick mode.
//
// Every result is printed as one line `<figure>: <value> <unit>` so that issue notes and
// scripts can pick figures out with a grep; anything else a benchmark prints starts with '#'.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';

/** True when the run should shrink its sizes: `--quick` or BENCH_QUICK=1. */
export const QUICK = process.env.BENCH_QUICK === '1' || process.argv.includes('--quick');

/** Prints `<name>: <value> <unit>`. */
export function figure(name: string, value: number | string, unit = ''): void {
  const v = typeof value === 'number' && !Number.isInteger(value) ? Number(value.toPrecision(4)) : value;
  console.log(`${name}: ${v}${unit ? ` ${unit}` : ''}`);
}

/** Prints a comment line (context for the figures, never parsed). */
export function note(text: string): void {
  console.log(`# ${text}`);
}

/** The p-th percentile (0–100) of `values`, nearest-rank; sorts a copy. NaN when empty. */
export function percentile(values: ArrayLike<number>, p: number): number {
  const sorted = Float64Array.from(values as ArrayLike<number>).sort();
  return percentileSorted(sorted, p);
}

/** As `percentile`, for values already sorted ascending. */
export function percentileSorted(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export const MiB = 1024 * 1024;

/** Samples process RSS on an interval and on demand, keeping the peak. */
export class RssSampler {
  private peakBytes = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly intervalMs = 50) {}

  start(): this {
    this.sample();
    this.timer = setInterval(() => this.sample(), this.intervalMs);
    this.timer.unref();
    return this;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.sample();
  }

  /** Takes a sample now; returns the current RSS in bytes. */
  sample(): number {
    const rss = process.memoryUsage.rss();
    if (rss > this.peakBytes) this.peakBytes = rss;
    return rss;
  }

  /** Peak RSS seen so far, in MiB. */
  get peakMiB(): number {
    return this.peakBytes / MiB;
  }
}

/** Milliseconds since an arbitrary origin, sub-millisecond precision. */
export const now = (): number => performance.now();

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** CPU seconds (user + system, all threads) this process has used since `since`. */
export function cpuSeconds(since?: NodeJS.CpuUsage): number {
  const u = process.cpuUsage(since);
  return (u.user + u.system) / 1e6;
}

/** Runs `fn` repeatedly for about `ms` milliseconds; returns iterations per second. */
export function ratePerSecond(fn: () => void, ms = 1000, chunk = 1000): number {
  return rates(fn, ms, chunk).wall;
}

/**
 * Runs `fn` repeatedly for about `ms` milliseconds; iterations per wall-clock second and
 * per CPU second of this process (the latter is steadier on a machine shared with other work).
 */
export function rates(fn: () => void, ms = 1000, chunk = 1000): { wall: number; cpu: number } {
  // Warm up so the JIT has compiled the loop body.
  for (let i = 0; i < chunk; i++) fn();
  let iterations = 0;
  const start = now();
  const cpu0 = process.cpuUsage();
  let elapsed = 0;
  while (elapsed < ms) {
    for (let i = 0; i < chunk; i++) fn();
    iterations += chunk;
    elapsed = now() - start;
  }
  return { wall: (iterations / elapsed) * 1000, cpu: iterations / cpuSeconds(cpu0) };
}

/**
 * Raw hashing: per entry the sequencer needs at least entry_hash (domain ‖ seq ‖ ~270-byte
 * canonical entry ‖ prior), the leaf hash (0x00 ‖ 32) and on average one node hash (0x01 ‖ 64).
 * Also a gauge of how fast this shared machine is running at the moment.
 */
export function sha256x3Rate(hash: (input: Uint8Array) => Uint8Array, ms = 2000): { wall: number; cpu: number } {
  const entryInput = new Uint8Array(15 + 8 + 270 + 32).fill(0x61);
  const leafInput = new Uint8Array(1 + 32).fill(0x62);
  const nodeInput = new Uint8Array(1 + 64).fill(0x63);
  let sink = 0;
  const rate = rates(() => {
    sink ^= hash(entryInput)[0]! ^ hash(leafInput)[0]! ^ hash(nodeInput)[0]!;
  }, ms);
  if (sink === 0x1ff) console.log(''); // keep the results alive
  return rate;
}

/**
 * Scratch directories of one benchmark, removed together once its runs are done. On an ext4
 * without a journal (as on the CI machine) the allocator passes over inodes freed in the last
 * minutes, so files created just after a big directory is deleted cost ~0.5 ms each instead
 * of ~20 µs: a run that deleted its predecessor's directory first would measure that.
 */
export class ScratchDirs {
  private readonly dirs: string[] = [];

  make(prefix: string): string {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    this.dirs.push(dir);
    return dir;
  }

  removeAll(): void {
    for (const dir of this.dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * CPU time (ms, user + system, all threads) process `pid` has used, from /proc/<pid>/stat
 * (Linux only; NaN elsewhere). On a busy machine, CPU per request is the fair measure where
 * req/s depends on what else runs.
 */
export function processCpuMs(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name: utime and stime are the 12th and 13th, in USER_HZ (100) ticks.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10;
  } catch {
    return NaN;
  }
}

/**
 * Servers on one CPU, the load generator on another: on a 2-vCPU machine, letting the
 * scheduler place them moved a server's CPU per request by tens of percent between runs
 * (bare Koa: 29–66 µs), pinned by a few. Linux with `taskset` and two CPUs or more;
 * BENCH_PIN=0 turns it off. Returns how to spawn a pinned server and how to unpin this
 * process again, or undefined when not pinning.
 */
export function pinLoadGenerator():
  | { wrap: (command: string, args: string[]) => [string, string[]]; release: () => void }
  | undefined {
  const cpus = availableParallelism();
  if (process.env.BENCH_PIN === '0' || process.platform !== 'linux' || cpus < 2) return undefined;
  // -a: every thread of this process, autocannon's included.
  const pin = (list: string) => execFileSync('taskset', ['-a', '-cp', list, String(process.pid)], { stdio: 'ignore' });
  try {
    pin('1');
  } catch {
    return undefined;
  }
  return {
    wrap: (command, args) => ['taskset', ['-c', '0', command, ...args]],
    release: () => pin(`0-${cpus - 1}`),
  };
}
