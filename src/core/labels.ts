// The one rule for the labels an entry carries (`artifact`, `scope`, `tenant`): what a log
// stores forever in public must read the same to every reader. So a label is well-formed
// Unicode, is stored in NFC (the same text always has the same bytes, and so the same
// artifact id), fits its size, and holds no character that hides or rearranges text:
//   - controls: C0 (U+0000–001F), DEL, C1 (U+0080–009F)                  (category Cc)
//   - the line and paragraph separators U+2028, U+2029                   (Zl, Zp)
//   - format characters: bidi embeddings, overrides and isolates
//     (U+202A–202E, U+2066–2069), marks (U+200E, U+200F, U+061C), zero-width
//     characters (U+200B–200D, U+2060, U+FEFF), soft hyphen, tag characters, …   (Cf)
// Pure (no node:*, no Buffer): used by the API, the CLI and the explorer alike.
// Entries already in a log are never rewritten: the rule applies to new labels only.

export const LABEL_MAX_BYTES = { artifact: 1024, scope: 256, tenant: 256 } as const;
export type LabelField = keyof typeof LABEL_MAX_BYTES;

export type LabelCheck =
  | { readonly ok: true; readonly value: string }
  | { readonly ok: false; readonly reason: string };

/** Characters a label must not contain (tested after NFC, which never introduces them). */
const FORBIDDEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;

const encoder = new TextEncoder();

/** The character a label is refused for, as U+XXXX, or null. */
export function forbiddenCharacter(text: string): string | null {
  const m = FORBIDDEN.exec(text);
  return m ? `U+${m[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}` : null;
}

/** Checks `value` as the label `field`; when valid, `value` is its NFC form to record. */
export function checkLabel(field: LabelField, value: unknown): LabelCheck {
  if (typeof value !== 'string') return { ok: false, reason: `${field} must be a string` };
  if (!value.isWellFormed()) return { ok: false, reason: `${field} must be well-formed Unicode (no lone surrogates)` };
  const bad = forbiddenCharacter(value);
  if (bad)
    return {
      ok: false,
      reason: `${field} must not contain control, separator, bidi or invisible format characters (found ${bad})`,
    };
  const nfc = value.normalize('NFC');
  const max = LABEL_MAX_BYTES[field];
  if (encoder.encode(nfc).length > max) return { ok: false, reason: `${field} must be at most ${max} UTF-8 bytes` };
  return { ok: true, value: nfc };
}
