// GET /v1/audit/events: the audit stream's query (type, since, until, after) and its
// replay-then-follow server-sent events, bounded in what each stream may buffer.
import { PassThrough } from 'node:stream';
import type { Context } from 'koa';
import { type AuditFilter, type StoredEvent, matches } from './audit.js';
import { invalid } from './errors.js';
import { CONTROL_ENTRY_TYPES } from './recorder.js';
import type { ControlServices } from './services.js';

const AUDIT_PARAMS = ['type', 'since', 'until', 'after', 'follow'];
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

function timeParam(v: unknown, name: string): number | undefined {
  if (v === undefined) return undefined;
  const ms = typeof v === 'string' && ISO_TIME.test(v) ? Date.parse(v) : NaN;
  if (!Number.isFinite(ms))
    throw invalid(`invalid_${name}`, `${name} must be an ISO 8601 time like 2025-01-31T12:00:00Z`);
  return ms;
}

function single(ctx: Context, name: string): string | undefined {
  const v = ctx.query[name];
  if (Array.isArray(v)) throw invalid(`invalid_${name}`, `${name} may be given once`);
  return v;
}

export async function auditEvents(ctx: Context, s: ControlServices): Promise<void> {
  const unknown = Object.keys(ctx.query).find((k) => !AUDIT_PARAMS.includes(k));
  if (unknown)
    throw invalid(
      'unknown_parameter',
      `unknown query parameter ${JSON.stringify(unknown)}; allowed: ${AUDIT_PARAMS.join(', ')}`,
    );
  const typeParam = single(ctx, 'type');
  let types: Set<string> | undefined;
  if (typeParam !== undefined) {
    types = new Set(typeParam.split(',').map((t) => t.trim()));
    const bad = [...types].find((t) => !(CONTROL_ENTRY_TYPES as readonly string[]).includes(t));
    if (bad !== undefined)
      throw invalid(
        'invalid_type',
        `unknown event type ${JSON.stringify(bad)}; types: ${CONTROL_ENTRY_TYPES.join(', ')}`,
      );
  }
  const since = timeParam(single(ctx, 'since'), 'since');
  const until = timeParam(single(ctx, 'until'), 'until');
  if (since !== undefined && until !== undefined && until <= since)
    throw invalid('invalid_until', 'until must be later than since');
  const followParam = single(ctx, 'follow');
  if (followParam !== undefined && followParam !== 'true' && followParam !== 'false')
    throw invalid('invalid_follow', 'follow must be true or false');
  const headerId = ctx.get('Last-Event-ID');
  const afterRaw = headerId !== '' ? headerId : single(ctx, 'after');
  let after = 0;
  if (afterRaw !== undefined) {
    if (!/^(0|[1-9][0-9]{0,15})$/.test(afterRaw.trim()))
      throw invalid('invalid_last_event_id', 'Last-Event-ID (or after) must be an event id: a non-negative integer');
    after = Number(afterRaw.trim());
    if (after > s.audit.lastId)
      throw invalid('invalid_last_event_id', `event ${after} does not exist (the last event is ${s.audit.lastId})`);
  }
  const filter: AuditFilter = {
    ...(types ? { types } : {}),
    ...(since !== undefined ? { since } : {}),
    ...(until !== undefined ? { until } : {}),
  };
  const follow = followParam !== 'false' && (until === undefined || until > Date.now());
  if (ctx.method === 'HEAD') {
    ctx.status = 200;
    ctx.type = 'text/event-stream';
    return;
  }
  streamEvents(ctx, s, after, filter, follow);
}

/** Largest backlog kept for a slow live SSE client before its stream is ended (it resumes with Last-Event-ID). */
const MAX_SSE_BUFFER = 16 * 1024 * 1024;
/** Replay pauses for the client above this much unsent output. */
const REPLAY_HIGH_WATER = 1024 * 1024;

function streamEvents(ctx: Context, s: ControlServices, after: number, filter: AuditFilter, follow: boolean): void {
  const socket = ctx.req.socket;
  socket.setTimeout(0);
  socket.setNoDelay(true);
  socket.setKeepAlive(true);
  const out = new PassThrough();
  ctx.status = 200;
  ctx.set({
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-store',
    'X-Accel-Buffering': 'no',
    Connection: 'keep-alive',
  });
  ctx.body = out;

  let last = after;
  let replaying = true;
  let done = false;
  const buffered: StoredEvent[] = [];
  const timers: NodeJS.Timeout[] = [];
  const send = (e: StoredEvent) => {
    if (done || e.id <= last) return;
    last = e.id;
    if (!matches(e, filter)) return;
    out.write(`id: ${e.id}\nevent: ${e.type}\ndata: ${e.json}\n\n`);
    if (out.writableLength > MAX_SSE_BUFFER)
      finish(': the client is too slow; reconnect with Last-Event-ID to resume\n\n');
  };
  const finish = (comment?: string) => {
    if (done) return;
    done = true;
    unsubscribe();
    s.streams.delete(closer);
    for (const t of timers) clearTimeout(t);
    if (comment) out.write(comment);
    out.end();
  };
  const unsubscribe = s.audit.subscribe((e) => (replaying ? buffered.push(e) : send(e)));
  const closer = () => finish(': the server is shutting down\n\n');
  s.streams.add(closer);
  // The response's 'close' fires when the client goes away (or the response ends).
  ctx.res.once('close', () => finish());
  out.on('error', () => finish());
  out.write(`retry: 2000\n: stele audit stream; resuming after event ${after}\n\n`);

  // Replay and the live events queued meanwhile are written at the client's pace (waiting
  // for 'drain'); only a live client that falls far behind is cut off.
  const paced = async (e: StoredEvent) => {
    send(e);
    if (!done && out.writableLength > REPLAY_HIGH_WATER) {
      await new Promise<void>((resolve) => {
        out.once('drain', resolve);
        out.once('close', resolve);
      });
    }
  };
  void (async () => {
    try {
      for await (const e of s.audit.since(after)) {
        if (done) return;
        await paced(e);
      }
      while (buffered.length > 0 && !done) await paced(buffered.shift()!);
      replaying = false;
      if (!follow) return finish();
      const ping = setInterval(() => out.write(': keep-alive\n\n'), 15_000);
      ping.unref();
      timers.push(ping as unknown as NodeJS.Timeout);
      if (filter.until !== undefined) {
        const t = setTimeout(() => finish(), Math.max(0, filter.until - Date.now()));
        t.unref();
        timers.push(t);
      }
    } catch (e) {
      s.logger.error({ err: (e as Error).message }, 'audit stream replay failed');
      finish(': replay failed; reconnect to resume\n\n');
    }
  })();
}
