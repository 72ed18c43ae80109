// RequestMetrics (src/api/request-metrics.ts) exposes what prom-client's own labelled counter
// and histogram would, fed the same requests: the text a scrape reads, and the JSON.
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { LATENCY_BUCKETS, RequestMetrics } from '../../src/api/request-metrics.js';

function reference(registry: Registry) {
  const requests = new Counter({
    name: 'stele_http_requests_total',
    help: 'HTTP requests',
    labelNames: ['route', 'method', 'status'],
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'stele_http_request_duration_seconds',
    help: 'HTTP request latency',
    labelNames: ['route', 'method'],
    buckets: [...LATENCY_BUCKETS],
    registers: [registry],
  });
  return (route: string, method: string, status: number, seconds: number) => {
    latency.labels({ route, method }).observe(seconds);
    requests.labels({ route, method, status: String(status) }).inc();
  };
}

describe('RequestMetrics', () => {
  it('exposes the counter and histogram prom-client would, line for line, bounds and all', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const metrics = new RequestMetrics(ours);
    const record = reference(theirs);
    expect(await ours.metrics()).toBe(await theirs.metrics());
    const routes = ['/api/ledger/entry', '/healthz', 'other', '/api/ledger/"odd"\\'];
    // Every bound exactly, values between and beyond them, statuses and methods interleaved.
    const times = [0, ...LATENCY_BUCKETS, ...LATENCY_BUCKETS.map((b) => b * 1.5), 7, 1e-9];
    let k = 0;
    for (const seconds of times) {
      for (const route of routes) {
        const method = k % 5 === 0 ? 'POST' : 'GET';
        const status = [200, 404, 400, 200, 503][k % 5]!;
        metrics.record(route, method, status, seconds);
        record(route, method, status, seconds);
        k++;
      }
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
    // As JSON too (exemplars aside: prom-client lists empty ones, which mean nothing).
    const json = async (r: Registry) =>
      (await r.getMetricsAsJSON()).map((m) => ({
        ...m,
        values: m.values.map(
          ({ labels, value, metricName }: { labels: object; value: number; metricName?: string }) => ({
            labels,
            value,
            metricName,
          }),
        ),
      }));
    expect(await json(ours)).toEqual(await json(theirs));
    ours.resetMetrics();
    theirs.resetMetrics();
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });
});
