// A few lines instead of a framework: elements are built with h()/svg() and text is always
// set as text (never parsed as HTML), so nothing the server sends can inject markup.
export type Child = Node | string | number | null | undefined | false | Child[];
export type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>;

function append(el: Element, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

function setAttrs(el: Element, attrs: Attrs | undefined): void {
  if (!attrs) return;
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (typeof v === 'function') el.addEventListener(k.replace(/^on/, ''), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attrs | null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  setAttrs(el, attrs ?? undefined);
  append(el, children);
  return el;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

export function svg(tag: string, attrs?: Attrs | null, ...children: Child[]): SVGElement {
  const el = document.createElementNS(SVG_NS, tag) as SVGElement;
  setAttrs(el, attrs ?? undefined);
  append(el, children);
  return el;
}

export type Verdict = 'PASS' | 'FAIL' | 'SKIP' | 'MISSING' | 'UNKNOWN' | 'PENDING' | 'NOTFOUND';

const ICON: Record<Verdict, string> = {
  PASS: '✓',
  FAIL: '✗',
  SKIP: '–',
  MISSING: '?',
  UNKNOWN: '?',
  PENDING: '…',
  NOTFOUND: '∅',
};
const WORD: Record<Verdict, string> = {
  PASS: 'PASS',
  FAIL: 'FAIL',
  SKIP: 'SKIP',
  MISSING: 'MISSING',
  UNKNOWN: 'UNKNOWN',
  PENDING: 'CHECKING',
  NOTFOUND: 'NOT FOUND',
};

/** A status shown by icon, word and colour together (never colour alone). */
export function badge(v: Verdict, label?: string): HTMLElement {
  return h(
    'span',
    { class: `badge badge-${v.toLowerCase()}`, 'data-status': v },
    h('span', { 'aria-hidden': 'true' }, ICON[v]),
    ' ',
    label ?? WORD[v],
  );
}

export function clear(el: Element): void {
  while (el.firstChild) el.firstChild.remove();
}

/** A hash shown in full, wrapping on narrow screens, selectable in one click. */
export const hashText = (hex: string, extra?: Attrs): HTMLElement => h('code', { class: 'hash', ...extra }, hex);

export function fmtBytes(n: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
  let u = 0;
  while (n >= 1024 && u < units.length - 1) {
    n /= 1024;
    u++;
  }
  return `${u === 0 ? n : n.toFixed(1)} ${units[u]}`;
}

export const fmtInt = (n: number): string => n.toLocaleString('en-US');

export function fmtTime(t: string | number): string {
  const d = typeof t === 'number' ? new Date(t) : new Date(t);
  return Number.isNaN(d.getTime())
    ? String(t)
    : d
        .toISOString()
        .replace('T', ' ')
        .replace(/\.\d{3}Z$/, 'Z')
        .replace('Z', ' UTC');
}
