// The HTTP request metrics: stele_http_requests_total{route,method,status} and the histogram
// stele_http_request_duration_seconds{route,method}. Each request adds to plain numbers of
// its series; prom-client's registry formats them only when scraped. A labelled prom-client
// counter or histogram builds a key from its label object on every update, which cost each
// read about a microsecond. What is exposed is what those two would expose, line for line
// (test/api/request-metrics.test.ts compares them).
import type { Metric, Registry } from 'prom-client';

const REQUESTS = 'stele_http_requests_total';
const LATENCY = 'stele_http_request_duration_seconds';
export const LATENCY_BUCKETS: readonly number[] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/** One route and method: its latency histogram, and its requests by status (the counter's series, in order). */
interface Series {
  readonly labels: Readonly<Record<string, string>>;
  /** Observations per bucket (not cumulative), the last beyond every bound. */
  readonly buckets: number[];
  sum: number;
  count: number;
  readonly statuses: Map<number, Counted>;
}

interface Counted {
  readonly labels: Readonly<Record<string, string>>;
  count: number;
}

/** A value as prom-client's registry formats it: its labels, and those shared by its series. */
interface Value {
  readonly labels: Record<string, string | number>;
  readonly sharedLabels?: Record<string, string>;
  readonly value: number;
  readonly metricName?: string;
}

const splay = ({ sharedLabels, ...v }: Value): Value =>
  sharedLabels ? { ...v, labels: { ...v.labels, ...sharedLabels } } : v;

export class RequestMetrics {
  private readonly series = new Map<string, Series>();
  /** Every status series of every route, in the order each was first counted (as prom-client lists them). */
  private readonly counted: Counted[] = [];

  constructor(registry: Registry) {
    const metric = (name: string, help: string, type: string, values: () => Value[]) => {
      const getForPromString = async () => ({ name, help, type, aggregator: 'sum', values: values() });
      // As JSON, a value carries its series' labels itself (as prom-client's get gives it).
      const get = async () => ({ ...(await getForPromString()), values: values().map(splay) });
      const reset = () => {
        this.series.clear();
        this.counted.length = 0;
      };
      return { name, help, type, aggregator: 'sum', get, getForPromString, reset };
    };
    registry.registerMetric(
      metric(REQUESTS, 'HTTP requests', 'counter', () => this.requestValues()) as unknown as Metric,
    );
    registry.registerMetric(
      metric(LATENCY, 'HTTP request latency', 'histogram', () => this.latencyValues()) as unknown as Metric,
    );
  }

  /** Counts one answered request of `route` (a low-cardinality label) taking `seconds`. */
  record(route: string, method: string, status: number, seconds: number): void {
    const key = method === 'GET' ? route : `${route} ${method}`;
    let s = this.series.get(key);
    if (!s) {
      s = {
        labels: { route, method },
        buckets: LATENCY_BUCKETS.map(() => 0).concat(0),
        sum: 0,
        count: 0,
        statuses: new Map(),
      };
      this.series.set(key, s);
    }
    let b = 0;
    while (b < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[b]!) b++;
    s.buckets[b]!++;
    s.sum += seconds;
    s.count++;
    let c = s.statuses.get(status);
    if (!c) {
      c = { labels: { route, method, status: String(status) }, count: 0 };
      s.statuses.set(status, c);
      this.counted.push(c);
    }
    c.count++;
  }

  private requestValues(): Value[] {
    return this.counted.map((c) => ({ labels: c.labels, value: c.count }));
  }

  private latencyValues(): Value[] {
    const out: Value[] = [];
    for (const s of this.series.values()) {
      let cumulative = 0;
      LATENCY_BUCKETS.forEach((le, b) => {
        cumulative += s.buckets[b]!;
        out.push({ labels: { le }, sharedLabels: s.labels, value: cumulative, metricName: `${LATENCY}_bucket` });
      });
      out.push(
        { labels: { le: '+Inf' }, sharedLabels: s.labels, value: s.count, metricName: `${LATENCY}_bucket` },
        { labels: {}, sharedLabels: s.labels, value: s.sum, metricName: `${LATENCY}_sum` },
        { labels: {}, sharedLabels: s.labels, value: s.count, metricName: `${LATENCY}_count` },
      );
    }
    return out;
  }
}
