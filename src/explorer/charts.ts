// Inline SVG pictures: anchors over time (stacked by entry type), entries by type, and the
// audit path of one entry from its leaf up to the signed root. No chart library: a few
// rectangles and lines, each type drawn with its own fill pattern as well as colour, with
// text labels and a data table for screen readers.
import { short, toHex } from './bytes.js';
import { type Child, fmtInt, fmtTime, h, svg } from './dom.js';
import type { FoldedProof } from './proof.js';

export interface ChartEntry {
  readonly timestamp: string;
  readonly type: string;
  /** How many entries this one stands for (a sample of a large log); 1 when absent. */
  readonly weight?: number;
}

/** Entries counted, their weights included. */
const weightOf = (entries: readonly ChartEntry[]): number => entries.reduce((n, e) => n + (e.weight ?? 1), 0);

const COLOURS = ['#1f5fa8', '#b35806', '#1b7837', '#762a83', '#8c510a', '#01665e'];
const PATTERNS = ['solid', 'hatch', 'dots', 'cross', 'hlines', 'vlines'] as const;
let chartSeq = 0;

function patternDefs(prefix: string): SVGElement {
  const defs = svg('defs');
  PATTERNS.forEach((p, i) => {
    const c = COLOURS[i % COLOURS.length]!;
    const pat = svg('pattern', { id: `${prefix}-p${i}`, width: 6, height: 6, patternUnits: 'userSpaceOnUse' });
    pat.append(svg('rect', { width: 6, height: 6, fill: p === 'solid' ? c : '#fff' }));
    if (p === 'hatch')
      pat.append(svg('path', { d: 'M-1,1 l2,-2 M0,6 l6,-6 M5,7 l2,-2', stroke: c, 'stroke-width': 2 }));
    if (p === 'dots') pat.append(svg('circle', { cx: 3, cy: 3, r: 1.6, fill: c }));
    if (p === 'cross') pat.append(svg('path', { d: 'M0,0 l6,6 M6,0 l-6,6', stroke: c, 'stroke-width': 1.4 }));
    if (p === 'hlines') pat.append(svg('path', { d: 'M0,3 h6', stroke: c, 'stroke-width': 2 }));
    if (p === 'vlines') pat.append(svg('path', { d: 'M3,0 v6', stroke: c, 'stroke-width': 2 }));
    defs.append(pat);
  });
  return defs;
}

const fill = (prefix: string, i: number) => `url(#${prefix}-p${i % PATTERNS.length})`;
const stroke = (i: number) => COLOURS[i % COLOURS.length]!;

const BUCKETS = [1e3, 1e4, 6e4, 3e5, 9e5, 36e5, 216e5, 864e5, 6048e5, 2592e6];

function bucketLabel(ms: number): string {
  if (ms < 6e4) return `${ms / 1e3} s`;
  if (ms < 36e5) return `${ms / 6e4} min`;
  if (ms < 864e5) return `${ms / 36e5} h`;
  return `${ms / 864e5} d`;
}

/** An axis label as precise as the bucket: seconds, minutes or days. */
function tickLabel(ms: number, bucket: number): string {
  const t = fmtTime(ms); // YYYY-MM-DD HH:MM:SS UTC
  if (bucket < 6e4) return t.slice(11, 19);
  if (bucket < 864e5) return t.slice(5, 16);
  return t.slice(0, 10);
}

function legend(prefix: string, types: Array<[string, number]>): HTMLElement {
  return h(
    'ul',
    { class: 'legend' },
    types.map(([t, n], i) =>
      h(
        'li',
        null,
        svg(
          'svg',
          { width: 16, height: 16, 'aria-hidden': 'true' },
          svg('rect', { width: 16, height: 16, fill: fill(prefix, i), stroke: stroke(i) }),
        ),
        ` ${t} (${fmtInt(n)})`,
      ),
    ),
  );
}

/** Entries counted per time bucket (about 40 buckets over their span) and entry type, busiest type first. */
function bucketCounts(entries: readonly ChartEntry[], times: readonly number[]) {
  const min = Math.min(...times);
  const max = Math.max(...times);
  const bucket = BUCKETS.find((b) => (max - min) / b < 40) ?? BUCKETS[BUCKETS.length - 1]!;
  const start = Math.floor(min / bucket) * bucket;
  const n = Math.floor((max - start) / bucket) + 1;
  const typeCounts = new Map<string, number>();
  for (const e of entries) typeCounts.set(e.type, (typeCounts.get(e.type) ?? 0) + (e.weight ?? 1));
  const types = [...typeCounts]
    .map(([t, n]): [string, number] => [t, Math.round(n)])
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  const typeIndex = new Map(types.map(([t], i) => [t, i]));
  const counts = Array.from({ length: n }, () => new Array<number>(types.length).fill(0));
  for (const e of entries) {
    const t = Date.parse(e.timestamp);
    if (!Number.isFinite(t)) continue;
    counts[Math.floor((t - start) / bucket)]![typeIndex.get(e.type)!]! += e.weight ?? 1;
  }
  for (const c of counts) c.forEach((v, i) => (c[i] = Math.round(v)));
  return { min, max, bucket, start, n, types, counts };
}

/** Geometry of the time chart, in SVG units. */
const W = 720;
const H = 260;
const L = 48;
const B = 36;
const T = 12;
const PLOT_W = W - L - 12;
const PLOT_H = H - B - T;

/** Anchors over time, stacked by entry type, plus a table of the same numbers. */
export function timeChart(entries: readonly ChartEntry[]): HTMLElement {
  const prefix = `c${++chartSeq}`;
  const times = entries.map((e) => Date.parse(e.timestamp)).filter((t) => Number.isFinite(t));
  if (times.length === 0) return h('p', null, 'No entries to chart.');
  const { min, max, bucket, start, n, types, counts } = bucketCounts(entries, times);
  const peak = Math.max(1, ...counts.map((c) => c.reduce((a, b) => a + b, 0)));
  const plotH = PLOT_H;
  const bw = PLOT_W / n;
  const chart = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-labelledby': `${prefix}-t` });
  chart.append(
    svg(
      'title',
      { id: `${prefix}-t` },
      `Anchors over time: ${fmtInt(Math.round(weightOf(entries)))} entries in ${n} buckets of ${bucketLabel(bucket)}, at most ${peak} per bucket`,
    ),
  );
  chart.append(patternDefs(prefix));
  for (const f of [0, 0.5, 1]) {
    const y = T + plotH - f * plotH;
    chart.append(svg('line', { x1: L, x2: W - 12, y1: y, y2: y, class: 'grid' }));
    chart.append(
      svg('text', { x: L - 6, y: y + 4, 'text-anchor': 'end', class: 'axis' }, String(Math.round(f * peak))),
    );
  }
  drawStacks(chart, prefix, counts, peak, bw, (i, v, ti) => `${fmtTime(start + i * bucket)}: ${v} × ${types[ti]![0]}`);
  chart.append(svg('line', { x1: L, x2: W - 12, y1: T + plotH, y2: T + plotH, class: 'axis-line' }));
  const ticks = n === 1 ? [0] : [0, Math.floor((n - 1) / 2), n - 1];
  for (const i of [...new Set(ticks)]) {
    const anchor = i === 0 ? 'start' : i === n - 1 ? 'end' : 'middle';
    const x = i === 0 ? L : i === n - 1 ? W - 12 : L + (i + 0.5) * bw;
    chart.append(
      svg('text', { x, y: H - 12, 'text-anchor': anchor, class: 'axis' }, tickLabel(start + i * bucket, bucket)),
    );
  }
  const rows = counts
    .map((c, i) => ({ c, i }))
    .filter(({ c }) => c.some((v) => v > 0))
    .map(({ c, i }) =>
      h(
        'tr',
        null,
        h('th', { scope: 'row' }, fmtTime(start + i * bucket)),
        c.map((v) => h('td', null, fmtInt(v))),
      ),
    );
  return h(
    'figure',
    { class: 'figure', 'data-testid': 'time-chart' },
    chart,
    legend(prefix, types),
    h(
      'figcaption',
      null,
      `Anchors per ${bucketLabel(bucket)} from ${fmtTime(min)} to ${fmtTime(max)} (record timestamps, stacked by entry type).`,
    ),
    h(
      'details',
      null,
      h('summary', null, 'Data table'),
      h(
        'table',
        { class: 'data' },
        h(
          'thead',
          null,
          h(
            'tr',
            null,
            h('th', { scope: 'col' }, 'Bucket start'),
            types.map(([t]) => h('th', { scope: 'col' }, t)),
          ),
        ),
        h('tbody', null, rows),
      ),
    ),
  );
}

/** One stacked bar per bucket, a rectangle per type with its count as a tooltip. */
function drawStacks(
  chart: SVGElement,
  prefix: string,
  counts: readonly number[][],
  peak: number,
  bw: number,
  tip: (bucket: number, count: number, type: number) => string,
): void {
  const plotH = PLOT_H;
  counts.forEach((c, i) => {
    let y = T + plotH;
    c.forEach((v, ti) => {
      if (v === 0) return;
      const hgt = (v / peak) * plotH;
      y -= hgt;
      const r = svg('rect', {
        x: L + i * bw + 1,
        y,
        width: Math.max(1, bw - 2),
        height: hgt,
        fill: fill(prefix, ti),
        stroke: stroke(ti),
        'stroke-width': 0.8,
      });
      r.append(svg('title', null, tip(i, v, ti)));
      chart.append(r);
    });
  });
}

/** Entries by type as labelled horizontal bars. */
export function typeChart(entries: readonly ChartEntry[]): HTMLElement {
  const prefix = `c${++chartSeq}`;
  const m = new Map<string, number>();
  for (const e of entries) m.set(e.type, (m.get(e.type) ?? 0) + (e.weight ?? 1));
  const types = [...m]
    .map(([t, n]): [string, number] => [t, Math.round(n)])
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  const total = Math.round(weightOf(entries)) || 1;
  const peak = Math.max(1, ...types.map(([, n]) => n));
  const W = 720;
  const rowH = 30;
  const H = types.length * rowH + 8;
  const L = 190;
  const chart = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-labelledby': `${prefix}-t` });
  chart.append(
    svg('title', { id: `${prefix}-t` }, `Entries by type: ${types.map(([t, n]) => `${t} ${n}`).join(', ')}`),
  );
  chart.append(patternDefs(prefix));
  types.forEach(([t, n], i) => {
    const y = 4 + i * rowH;
    const w = ((W - L - 140) * n) / peak;
    chart.append(svg('text', { x: L - 8, y: y + 18, 'text-anchor': 'end', class: 'label' }, t));
    chart.append(
      svg('rect', {
        x: L,
        y: y + 3,
        width: Math.max(1, w),
        height: rowH - 8,
        fill: fill(prefix, i),
        stroke: stroke(i),
      }),
    );
    chart.append(
      svg('text', { x: L + w + 8, y: y + 18, class: 'label' }, `${fmtInt(n)} (${((100 * n) / total).toFixed(1)}%)`),
    );
  });
  return h(
    'figure',
    { class: 'figure', 'data-testid': 'type-chart' },
    chart,
    h('figcaption', null, 'Entries by type (count and share).'),
  );
}

const range = (lo: number, hi: number): string => (hi - lo === 1 ? `leaf ${lo}` : `leaves ${lo}–${hi - 1}`);

/** Size of a box in the audit path drawing. */
const BOX_W = 200;
const BOX_H = 44;

/** One node of the audit path drawing: a titled box with the start of its hash. */
function box(
  x: number,
  y: number,
  title: string,
  hash: Uint8Array,
  kind: 'node' | 'sibling' | 'root' | 'leaf' | 'bad',
) {
  return svg(
    'g',
    { class: `pbox pbox-${kind}` },
    svg('rect', { x: x - BOX_W / 2, y, width: BOX_W, height: BOX_H, rx: 6 }),
    svg('text', { x, y: y + 18, 'text-anchor': 'middle', class: 'pbox-title' }, title),
    svg('text', { x, y: y + 35, 'text-anchor': 'middle', class: 'pbox-hash' }, short(toHex(hash), 20)),
  );
}

/** The audit path in words: the leaf hash, then each sibling and the node it makes. */
function pathAsText(p: FoldedProof): Child[] {
  const { steps } = p;
  return [
    h(
      'li',
      null,
      `Leaf ${p.leaf.index}: SHA-256(0x00 ‖ entry hash) = `,
      h('code', { class: 'hash' }, toHex(p.leaf.hash)),
    ),
    ...steps.map((s) =>
      h(
        'li',
        null,
        `Sibling ${range(s.sibling.lo, s.sibling.hi)} on the ${s.side} `,
        h('code', { class: 'hash' }, toHex(s.sibling.hash)),
        ` → ${range(s.node.lo, s.node.hi)} = `,
        h('code', { class: 'hash' }, toHex(s.node.hash)),
      ),
    ),
  ];
}

/**
 * The audit path drawn from the leaf (bottom) to the root (top): at each level the node
 * computed so far (solid box, in the centre column) and the sibling read from the tiles
 * (dashed box, on its side), joined into their parent one row up.
 */
export function auditPathDrawing(p: FoldedProof, root: Uint8Array): HTMLElement {
  const prefix = `c${++chartSeq}`;
  const steps = p.steps;
  const top = steps.length ? steps[steps.length - 1]!.node.hash : p.leaf.hash;
  const rootOk = top.length === root.length && top.every((b, i) => b === root[i]);
  const W = 640;
  const rowH = 78;
  const boxH = BOX_H;
  const cx = W / 2;
  const rows = steps.length + 1;
  const H = rows * rowH + 36;
  const yOf = (level: number) => H - 8 - (level + 1) * rowH + (rowH - boxH) / 2;
  const pic = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'pathsvg', role: 'img', 'aria-labelledby': `${prefix}-t` });
  pic.append(
    svg(
      'title',
      { id: `${prefix}-t` },
      `Audit path of leaf ${p.leaf.index}: ${steps.length} sibling hashes from the tiles combine with the leaf hash up to the root`,
    ),
  );
  pic.append(box(cx, yOf(0), `${range(p.leaf.index, p.leaf.index + 1)} (leaf hash)`, p.leaf.hash, 'leaf'));
  steps.forEach((s, i) => {
    const y = yOf(i);
    const sx = s.side === 'left' ? cx - 215 : cx + 215;
    const parentY = yOf(i + 1);
    pic.append(svg('line', { x1: sx, y1: y, x2: cx, y2: parentY + boxH, class: 'pedge pedge-sibling' }));
    pic.append(svg('line', { x1: cx, y1: y, x2: cx, y2: parentY + boxH, class: 'pedge' }));
    pic.append(
      box(
        sx,
        y,
        `${s.side === 'left' ? '◀ ' : ''}${range(s.sibling.lo, s.sibling.hi)}${s.side === 'right' ? ' ▶' : ''}`,
        s.sibling.hash,
        'sibling',
      ),
    );
    const last = i === steps.length - 1;
    pic.append(
      box(
        cx,
        parentY,
        last ? `root, ${range(s.node.lo, s.node.hi)}` : range(s.node.lo, s.node.hi),
        s.node.hash,
        last ? (rootOk ? 'root' : 'bad') : 'node',
      ),
    );
  });
  pic.append(
    svg(
      'text',
      {
        x: cx,
        y: yOf(steps.length) - 8,
        'text-anchor': 'middle',
        class: `pverdict ${rootOk ? 'pverdict-ok' : 'pverdict-bad'}`,
      },
      rootOk ? '✓ equals the signed root' : '✗ NOT the signed root',
    ),
  );
  if (steps.length === 0)
    pic.append(
      svg(
        'text',
        { x: cx, y: H - 4, 'text-anchor': 'middle', class: 'label' },
        'a one-leaf tree: the leaf is the root',
      ),
    );
  return h(
    'figure',
    { class: 'figure', 'data-testid': 'audit-path' },
    pic,
    h(
      'figcaption',
      null,
      `From the leaf up: solid boxes are hashes computed in your browser, dashed boxes are sibling hashes read from the tiles. The top box must equal the signed root ${short(toHex(root))}: ${rootOk ? 'it does' : 'it does NOT'}.`,
    ),
    h('details', null, h('summary', null, 'The path as text'), h('ol', { class: 'steps' }, pathAsText(p))),
  );
}
