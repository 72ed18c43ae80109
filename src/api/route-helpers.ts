// What the /api/ledger routes share: the rules for their query parameters and the headers
// of their answers.
import { type ParsedUrlQuery, parse as parseQuery } from 'node:querystring';
import type { Context } from 'koa';
import { badRequest } from '../http/errors.js';

const MAX_QUERY_VALUE = 128;

/** What `ctx.type = 'json'` sets, without its per-request MIME lookup. */
export const JSON_TYPE = 'application/json; charset=utf-8';

export type Query = ParsedUrlQuery;

/** One parameter whose name and value need no decoding: what a verifier's lookup sends. */
const ONE_PLAIN_PARAMETER = /^[a-z]+=[0-9A-Za-z_]*$/;

/**
 * The prototype of a shortcut's query: it inherits nothing, as node:querystring's object,
 * but V8 keeps objects made from it fast (a null-prototype object is a slow dictionary).
 */
const NOTHING_INHERITED: object = Object.freeze(Object.create(null));

/**
 * A query string's parameters, as node:querystring parses them; the common query of one
 * plain parameter without its general parser (which cost the entry route ~2 % of its CPU).
 */
export function parseQueryString(qs: string): Query {
  if (!ONE_PLAIN_PARAMETER.test(qs)) return parseQuery(qs);
  const query: Query = Object.create(NOTHING_INHERITED);
  const eq = qs.indexOf('=');
  query[qs.slice(0, eq)] = qs.slice(eq + 1);
  return query;
}

/**
 * The request's query parameters: node:querystring parses several times faster than ctx.query.
 * Its encoding was checked at the edge (src/http/request-rules.ts checkQueryEncoding).
 */
export const queryOf = (ctx: Context): Query => parseQueryString(ctx.querystring);

export const noStore = (ctx: Context): void => {
  ctx.set('Cache-Control', 'no-store');
};

/** A query parameter given exactly once, or undefined; `max` bounds its length (characters). */
export function single(query: Query, name: string, max = MAX_QUERY_VALUE): string | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (Array.isArray(v)) throw badRequest('duplicate_parameter', `${name} is given more than once`);
  if (v.length > max) throw badRequest(`invalid_${name}`, `${name} is too long`);
  return v;
}

/** A tree size or leaf index parameter: required, a decimal integer without leading zeros. */
export function treeSizeParam(query: Query, name: string): number {
  const v = single(query, name);
  if (v === undefined) throw badRequest(`missing_${name}`, `${name} is required`);
  if (!/^(0|[1-9][0-9]{0,15})$/.test(v) || !Number.isSafeInteger(Number(v))) {
    throw badRequest(`invalid_${name}`, `${name} must be a non-negative integer`);
  }
  return Number(v);
}
