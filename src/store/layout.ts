// Object names and HTTP metadata of the published log (docs/design.md §1.2).
import { parseTilePath } from '../core/tiles.js';

export const CHECKPOINT_KEY = 'checkpoint';
/** JSON sidecar: the signed note plus its publish timestamp, one object so readers never mix two versions. */
export const CHECKPOINT_JSON_KEY = 'checkpoint.json';

/** The explorer's trust configuration (origin, vkey, witnesses), published beside the tiles. */
export const EXPLORER_CONFIG_KEY = 'explorer.json';

export interface ObjectMeta {
  readonly contentType: string;
  readonly cacheControl: string;
}

const IMMUTABLE = 'public, max-age=31536000, immutable';

/** Content-Type and Cache-Control for a published object, derived from its key. */
export function objectMeta(key: string): ObjectMeta {
  if (key === CHECKPOINT_KEY) return { contentType: 'text/plain; charset=utf-8', cacheControl: 'no-cache' };
  if (key === CHECKPOINT_JSON_KEY || key === EXPLORER_CONFIG_KEY)
    return { contentType: 'application/json', cacheControl: 'no-cache' };
  if (parseTilePath(key)) return { contentType: 'application/octet-stream', cacheControl: IMMUTABLE };
  return { contentType: 'application/octet-stream', cacheControl: 'no-store' };
}
