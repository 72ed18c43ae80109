/// <reference lib="dom" />
// The "Verify a file" page: a file hashed in the browser and found in the log, or a dropped
// tlog-proof verified on its own, each with the report `stele ledger verify` prints.
import { TLOG_PROOF_EXTENSION } from '../../core/tlog-proof.js';
import { auditPathDrawing } from '../charts.js';
import { badge, type Child, clear, fmtBytes, fmtInt, h, hashText } from '../dom.js';
import { hashBlob } from '../hashfile.js';
import { locate } from '../lookup.js';
import { apiSearch, type Query } from '../search.js';
import { base, client, load, setFailure, siteHasApi } from '../site.js';
import { buildReport, verifyEntry, verifyTlogProofFile } from '../page-checks.js';
import { dl, entryLink, noCheckpoint, reportList } from '../widgets.js';

export async function viewVerify(main: HTMLElement): Promise<void> {
  main.append(
    h('h1', { tabindex: '-1' }, 'Verify a file'),
    h(
      'p',
      null,
      'The file is hashed here, in your browser, a chunk at a time; it is never uploaded. Only its SHA-256 digest is looked up.',
    ),
    h(
      'p',
      null,
      'Or drop a ',
      h('code', null, '.tlog-proof'),
      ' file (',
      h('code', null, 'stele ledger proof <id> --export'),
      '), alone or with the file it proves: it is verified here against the trusted key and witness policy, with nothing looked up.',
    ),
  );
  const input = h('input', {
    type: 'file',
    multiple: true,
    id: 'file-input',
    class: 'visually-hidden',
    tabindex: '-1',
    'data-testid': 'file-input',
  });
  const zone = h(
    'div',
    { class: 'dropzone', 'data-testid': 'dropzone' },
    h('p', null, h('span', { 'aria-hidden': 'true' }, '⬇ '), 'Drop a file here, or'),
    h('label', { for: 'file-input', class: 'button' }, 'Choose a file…'),
    input,
  );
  const out = h('div', { 'aria-live': 'polite', 'data-testid': 'verify-output' });
  main.append(zone, out);
  // A dropped C2SP tlog-proof (`.tlog-proof`) is verified on its own; beside it, a file is
  // checked against the proof's entry instead of being looked up.
  const start = (files: ArrayLike<File> | null | undefined) => {
    const all = files ? Array.from(files) : [];
    const proof = all.find((f) => f.name.endsWith(TLOG_PROOF_EXTENSION));
    const file = all.find((f) => f !== proof);
    if (proof) void verifyProofFile(proof, file, out);
    else if (file) void verifyFile(file, out);
  };
  input.addEventListener('change', () => start(input.files));
  zone.addEventListener('dragover', (ev) => {
    ev.preventDefault();
    zone.classList.add('dragging');
  });
  zone.addEventListener('dragleave', () => zone.classList.remove('dragging'));
  zone.addEventListener('drop', (ev) => {
    ev.preventDefault();
    zone.classList.remove('dragging');
    start(ev.dataTransfer?.files);
  });
  // Let the label act as a button from the keyboard too.
  zone.querySelector('label')!.setAttribute('tabindex', '0');
  zone.querySelector('label')!.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' || ev.key === ' ') {
      ev.preventDefault();
      input.click();
    }
  });
}

export let verifyRun = 0;

/**
 * The anchored file a changed copy most likely is: the latest entry under the file's name
 * (the site's search) that records another digest, verified (rules 3 and 4) against the
 * checkpoint before it is named. Null when there is none, or the site cannot say.
 */
export async function anchoredUnderName(
  name: string,
  digest: string,
  cp: { size: number; root: Uint8Array },
): Promise<{ digest: string; id: string } | null> {
  if (!(await siteHasApi())) return null;
  const answer = await apiSearch(base, name, 4);
  if (!('matches' in answer)) return null;
  for (const m of answer.matches) {
    if (m.seq >= cp.size) continue;
    const e = await verifyEntry(client, m.seq, cp);
    const recorded = e.fields?.digest;
    if (e.ok && e.id && e.fields?.artifact === name && typeof recorded === 'string' && recorded !== digest)
      return { digest: recorded, id: e.id };
  }
  return null;
}

export async function verifyFile(file: File, out: HTMLElement): Promise<void> {
  const run = ++verifyRun;
  clear(out);
  const progress = h('progress', { max: Math.max(1, file.size), value: 0, 'aria-label': 'Hashing progress' });
  const status = h('span', null, `Hashing ${file.name} (${fmtBytes(file.size)})…`);
  out.append(h('p', { role: 'status' }, status, ' ', progress));
  const digest = await hashBlob(file, (p) => {
    progress.value = p.bytes;
    status.textContent = `Hashing ${file.name}: ${fmtBytes(p.bytes)} of ${fmtBytes(p.total)}…`;
  });
  if (run !== verifyRun) return;
  clear(out);
  out.append(
    dl([
      ['File', `${file.name} (${fmtBytes(file.size)})`],
      ['SHA-256', hashText(digest, { 'data-testid': 'file-digest' })],
    ]),
  );
  const l = await load();
  if (!l.cp?.root) return noCheckpoint(out, l);
  const q: Extract<Query, { kind: 'digest' }> = { kind: 'digest', digest, text: digest };
  const r = await locate(q, l.cp.size, out);
  if (run !== verifyRun) return;
  const cp = (await load()).cp ?? l.cp;
  if (!r.found || !cp.root) {
    out.append(
      h(
        'div',
        { class: 'panel panel-notfound', 'data-testid': 'verify-result', 'data-status': 'NOTFOUND' },
        badge('NOTFOUND'),
        h('p', null, `Not found: no entry of this log records the digest of ${file.name} (${r.why}).`),
      ),
    );
    const original = cp.root ? await anchoredUnderName(file.name, digest, { size: cp.size, root: cp.root }) : null;
    if (run !== verifyRun || !original) return;
    out.append(
      h(
        'p',
        { class: 'differs', 'data-testid': 'differs' },
        `${file.name} is anchored with digest ${original.digest} (entry ${original.id}, verified against the signed checkpoint); this file's digest is ${digest}: it differs from the anchored file.`,
      ),
    );
    return;
  }
  const e = await verifyEntry(client, r.found.seq, { size: cp.size, root: cp.root });
  if (run !== verifyRun) return;
  const report = buildReport(cp, e, digest);
  if (report.result === 'FAIL')
    setFailure(
      `file-${digest}`,
      `Verification of ${file.name} failed: ${report.checks
        .filter((c) => c.status === 'FAIL')
        .map((c) => `${c.name}: ${c.detail}`)
        .join('; ')}`,
    );
  out.append(
    h(
      'div',
      {
        class: `panel panel-${report.result.toLowerCase()}`,
        'data-testid': 'verify-result',
        'data-status': report.result,
      },
      badge(
        report.result,
        report.result === 'PASS' ? `PASS — ${file.name} is in the log` : `FAIL — do not trust this entry`,
      ),
      h(
        'p',
        null,
        `Entry `,
        entryLink(e.seq, e.id ?? String(e.seq)),
        ` found via ${r.found.via}, leaf ${fmtInt(e.seq)} of tree size ${fmtInt(cp.size)}.`,
      ),
    ),
    reportList(report, 'verify-report'),
    h('h2', null, 'Inclusion proof'),
    e.proof ? auditPathDrawing(e.proof, cp.root) : h('p', null, 'No audit path.'),
  );
}

export async function verifyProofFile(proofFile: File, file: File | undefined, out: HTMLElement): Promise<void> {
  const run = ++verifyRun;
  clear(out);
  const [text, digest] = await Promise.all([proofFile.text(), file ? hashBlob(file) : Promise.resolve(undefined)]);
  if (run !== verifyRun) return;
  const l = await load();
  if (!l.resolved.trust) return noCheckpoint(out, l);
  const current = l.cp?.root && l.cp.signature.status === 'PASS' ? { size: l.cp.size, root: l.cp.root } : null;
  const v = await verifyTlogProofFile(text, l.resolved.trust, client, current, digest);
  if (run !== verifyRun) return;
  const r = v.report;
  if (r.result === 'FAIL')
    setFailure(
      `proof-${proofFile.name}`,
      `Verification of ${proofFile.name} failed: ${r.checks
        .filter((c) => c.status === 'FAIL')
        .map((c) => `${c.rule}. ${c.name}: ${c.detail}`)
        .join('; ')}`,
    );
  out.append(
    dl([
      ['Proof file', proofFile.name],
      ...(file && digest
        ? ([
            ['File', `${file.name} (${fmtBytes(file.size)})`],
            ['SHA-256', hashText(digest, { 'data-testid': 'file-digest' })],
          ] as Array<[string, Child]>)
        : []),
      ...(v.index >= 0
        ? ([
            ['Leaf index', fmtInt(v.index)],
            ['Tree size', fmtInt(v.size)],
          ] as Array<[string, Child]>)
        : []),
      ...(v.entry && typeof v.entry.digest === 'string'
        ? ([['Entry digest', hashText(v.entry.digest)]] as Array<[string, Child]>)
        : []),
    ]),
    h(
      'div',
      {
        class: `panel panel-${r.result.toLowerCase()}`,
        'data-testid': 'verify-result',
        'data-status': r.result,
        'data-verdict': r.verdict,
      },
      badge(r.result, r.result === 'PASS' ? `${r.verdict} — the proof verifies` : 'FAIL — do not trust this proof'),
    ),
    reportList(r, 'verify-report'),
  );
}
