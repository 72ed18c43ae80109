/// <reference lib="dom" />
// The trust page: the keys the page verifies against, where they come from, and the pin.
import { short } from '../bytes.js';
import { badge, fmtInt, fmtTime, h, hashText } from '../dom.js';
import { load, storage } from '../site.js';
import { pin, readSeen, SOURCE_LABEL, type TrustConfig, unpin, writeSeen } from '../trust.js';
import { dl } from '../widgets.js';

/** `rerender` draws the current page again once the trust changed (the router's). */
export async function viewTrust(main: HTMLElement, rerender: () => Promise<void>): Promise<void> {
  main.append(h('h1', { tabindex: '-1' }, 'Trust'));
  const l = await load();
  const r = l.resolved;
  const t = r.trust;
  const reload = () => {
    void load(true).then(() => rerender());
  };
  if (t && r.config) {
    main.append(
      h('p', null, `Everything on this site is verified against these keys, ${SOURCE_LABEL[r.source!]}.`),
      dl([
        ['Log', h('code', null, t.log.name)],
        ['Log key (vkey)', h('code', { class: 'hash', 'data-testid': 'trust-vkey' }, t.log.vkey)],
        ['Key id', hashText(t.log.keyId)],
        [
          'Witnesses',
          t.witnesses.length
            ? h(
                'ul',
                null,
                t.witnesses.map((w) => h('li', null, h('code', { class: 'hash' }, w.vkey))),
              )
            : 'none',
        ],
        [
          'Quorum',
          h(
            'span',
            { 'data-testid': 'trust-quorum' },
            t.quorum.required ? `${t.quorum.text} (C2SP tlog-policy)` : 'none: checkpoints are not witnessed',
          ),
        ],
      ]),
      r.source === 'pin'
        ? h(
            'button',
            { type: 'button', onclick: () => (unpin(storage, t.log.name), reload()) },
            'Unpin (use the site’s configuration again)',
          )
        : h(
            'button',
            { type: 'button', 'data-testid': 'pin', onclick: () => (pin(storage, r.config as TrustConfig), reload()) },
            'Pin these keys in this browser',
          ),
    );
    if (r.offered && r.mismatch)
      main.append(h('p', { class: 'panel panel-fail' }, badge('FAIL', 'Key changed'), ' ', r.mismatch));
  } else {
    main.append(
      h('p', { class: 'panel panel-fail' }, badge('FAIL', 'No key'), ' ', l.error ?? 'No log key is configured.'),
    );
  }
  main.append(h('h2', null, 'Pin a key by hand'), pinForm(reload));
  if (t) {
    const seen = readSeen(storage, t.log.name);
    main.append(
      h('h2', null, 'Last checkpoint seen'),
      seen
        ? h(
            'p',
            null,
            `Size ${fmtInt(seen.size)}, root `,
            h('code', null, short(seen.rootHex, 24)),
            `, on ${fmtTime(seen.at)}. Every later checkpoint must be consistent with it. `,
            h(
              'button',
              { type: 'button', onclick: () => (writeSeen(storage, t.log.name, null), reload()) },
              'Forget it',
            ),
          )
        : h('p', null, 'None yet.'),
    );
  }
}

/** The form that pins a log key (and its witnesses and threshold) typed by hand. */
function pinForm(reload: () => void): HTMLElement {
  const vkey = h('textarea', { id: 'pin-vkey', rows: 2 }) as HTMLTextAreaElement;
  const wits = h('textarea', { id: 'pin-witnesses', rows: 3 }) as HTMLTextAreaElement;
  const thr = h('input', { id: 'pin-threshold', type: 'number', min: 0, value: '' }) as HTMLInputElement;
  const msg = h('p', { role: 'status' });
  return h(
    'form',
    {
      class: 'pinform',
      onsubmit: (ev: Event) => {
        ev.preventDefault();
        try {
          const witnesses = wits.value
            .split('\n')
            .map((s) => s.trim())
            .filter(Boolean);
          const c: TrustConfig = {
            vkey: vkey.value.trim(),
            witnesses,
            threshold: thr.value === '' ? witnesses.length : Number(thr.value),
          };
          pin(storage, c);
          reload();
        } catch (e) {
          msg.textContent = `Not pinned: ${(e as Error).message}`;
        }
      },
    },
    h('label', { for: 'pin-vkey' }, 'Log vkey (', h('code', null, 'origin+hash+base64'), ')'),
    vkey,
    h('label', { for: 'pin-witnesses' }, 'Witness vkeys, one per line'),
    wits,
    h('label', { for: 'pin-threshold' }, 'Witness threshold (default: all)'),
    thr,
    h('button', { type: 'submit' }, 'Pin'),
    msg,
  );
}
