// Prometheus metrics (prom-client): HTTP traffic, tree size, batches, integration time.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { ReaderStats } from '../read/reader.js';
import { RequestMetrics } from './request-metrics.js';
import type { IntegratedBatch, PublishedCheckpoint } from '../sequencer/contract.js';

export class Metrics {
  readonly registry = new Registry();
  private readonly requests = new RequestMetrics(this.registry);
  readonly treeSize = new Gauge({
    name: 'stele_tree_size',
    help: 'Leaves in the latest published checkpoint',
    registers: [this.registry],
  });
  readonly checkpointAge = new Gauge({
    name: 'stele_checkpoint_timestamp_seconds',
    help: 'Publish time of the latest checkpoint',
    registers: [this.registry],
  });
  private readonly batchSize = new Histogram({
    name: 'stele_batch_size',
    help: 'Entries per integrated batch',
    buckets: [1, 10, 100, 1000, 10_000, 65_536],
    registers: [this.registry],
  });
  private readonly integration = new Histogram({
    name: 'stele_integration_seconds',
    help: 'Time from batch start to publish',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });

  private readonly anchorDecisions = new Counter({
    name: 'stele_anchor_policy_decisions_total',
    help: 'Anchors decided by the anchor policy (production mode), by decision',
    labelNames: ['decision'],
    registers: [this.registry],
  });
  private readonly anchorAllowed = this.anchorDecisions.labels({ decision: 'allow' });
  private readonly anchorDenied = this.anchorDecisions.labels({ decision: 'deny' });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /** Exposes a LogReader's fetches, cache hits and hash tile reads (tiles read per proof = reads / proofs). */
  watchReader(stats: ReaderStats): void {
    new Gauge({
      name: 'stele_hash_tile_reads',
      help: 'Hash tiles read by proofs (fetched or cached)',
      registers: [this.registry],
      collect() {
        this.set(stats.hashTileReads);
      },
    });
    new Gauge({
      name: 'stele_tile_fetches',
      help: 'Tiles and bundles fetched from storage',
      registers: [this.registry],
      collect() {
        this.set(stats.fetches);
      },
    });
    new Gauge({
      name: 'stele_tile_cache_hits',
      help: 'Tile and bundle reads answered from the cache',
      registers: [this.registry],
      collect() {
        this.set(stats.hits);
      },
    });
    let counted = 0;
    new Counter({
      name: 'stele_corrupt_objects_total',
      help: 'Stored tiles and bundles that failed authentication against the checkpoint (each counted once)',
      registers: [this.registry],
      collect() {
        this.inc(stats.corruptObjects - counted);
        counted = stats.corruptObjects;
      },
    });
  }

  /** Exposes readiness, the age of the published checkpoint and the sequencer's failed commits. */
  watchHealth(h: { notReady(): string | null; checkpoint(): PublishedCheckpoint; commitFailures?(): number }): void {
    new Gauge({
      name: 'stele_ready',
      help: '1 while anchors can be committed and published (GET /readyz), else 0',
      registers: [this.registry],
      collect() {
        this.set(h.notReady() === null ? 1 : 0);
      },
    });
    new Gauge({
      name: 'stele_checkpoint_age_seconds',
      help: 'Seconds since the latest checkpoint was published',
      registers: [this.registry],
      collect() {
        this.set(Math.max(0, (Date.now() - Date.parse(h.checkpoint().timestamp)) / 1000));
      },
    });
    if (h.commitFailures) {
      const failures = h.commitFailures;
      let seen = 0;
      new Counter({
        name: 'stele_commit_failures_total',
        help: 'Batches or checkpoint publishes that failed (each is retried or stops the sequencer)',
        registers: [this.registry],
        collect() {
          const now = failures();
          this.inc(now - seen);
          seen = now;
        },
      });
    }
  }

  /** Counts one anchor-policy decision. */
  anchorDecision(allowed: boolean): void {
    (allowed ? this.anchorAllowed : this.anchorDenied).inc();
  }

  /** Exposes how far an API replica with its own index has followed the published log. */
  watchFollower(status: () => { lag: number; indexed: number; served: number }): void {
    new Gauge({
      name: 'stele_follower_lag_entries',
      help: 'Published entries this replica has not indexed and served yet',
      registers: [this.registry],
      collect() {
        this.set(status().lag);
      },
    });
    new Gauge({
      name: 'stele_follower_indexed_entries',
      help: "Entries in this replica's own lookup index",
      registers: [this.registry],
      collect() {
        this.set(status().indexed);
      },
    });
  }

  onPublished(cp: PublishedCheckpoint, batch: IntegratedBatch | null): void {
    this.treeSize.set(cp.size);
    this.checkpointAge.set(Date.parse(cp.timestamp) / 1000);
    if (batch) {
      this.batchSize.observe(batch.count);
      if (batch.integrationMs !== undefined) this.integration.observe(batch.integrationMs / 1000);
    }
  }

  /** Records one answered request: its path (labelled by route), method, final status and time. */
  requestRecorder(): (path: string, method: string, status: number, seconds: number) => void {
    // The label of each path met (up to a bound: paths are the client's), not matched again.
    const labels = new Map<string, string>();
    return (path, method, status, seconds) => {
      let route = labels.get(path);
      if (route === undefined) {
        route = routeLabel(path);
        if (labels.size < 1024) labels.set(path, route);
      }
      this.requests.record(route, method, status, seconds);
    };
  }
}

/** Low-cardinality route label: tile paths collapse to their kind. */
function routeLabel(path: string): string {
  if (path.startsWith('/tile/'))
    return path.startsWith('/tile/entries/')
      ? '/tile/entries'
      : path.startsWith('/tile/records/')
        ? '/tile/records'
        : '/tile';
  if (/^\/(api\/ledger\/[a-z]+|checkpoint|healthz|readyz|metrics)$/.test(path)) return path;
  return 'other';
}
