import { Counter, Gauge, Histogram, type Metric } from 'prom-client';

/** Where an endpoint held by this instance stands, for the gauges. */
export interface EndpointStanding {
  readonly id: string;
  /** Changes in the feed after the endpoint's position. */
  lag(): number;
  /** Age of the oldest change not yet delivered; 0 when caught up. */
  oldestUndeliveredSeconds(): number;
}

/** The deliveries' metrics on `/metrics`: attempts by outcome, latency, and each endpoint's lag. */
export class DeliveryMetrics {
  readonly attempts = new Counter({
    name: 'webhook_delivery_attempts_total',
    registers: [],
    help: 'Webhook delivery attempts made by this instance, by outcome',
    labelNames: ['outcome'],
  });
  readonly latency = new Histogram({
    name: 'webhook_delivery_latency_seconds',
    registers: [],
    help: 'From a change being committed to its event being accepted (2xx) by the receiver',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 6 * 3600, 24 * 3600],
  });
  readonly lag: Gauge;
  readonly oldest: Gauge;

  constructor(endpoints: () => Iterable<EndpointStanding>) {
    this.lag = new Gauge({
      name: 'webhook_endpoint_lag_events',
      registers: [],
      help: "Changes in the feed after an endpoint's position (held by this instance)",
      labelNames: ['endpoint'],
      collect() {
        this.reset();
        for (const endpoint of endpoints()) this.set({ endpoint: endpoint.id }, endpoint.lag());
      },
    });
    this.oldest = new Gauge({
      name: 'webhook_endpoint_oldest_undelivered_seconds',
      registers: [],
      help: 'Age of the oldest change not yet delivered to an endpoint (held by this instance); 0 when caught up',
      labelNames: ['endpoint'],
      collect() {
        this.reset();
        for (const endpoint of endpoints())
          this.set({ endpoint: endpoint.id }, endpoint.oldestUndeliveredSeconds());
      },
    });
  }

  all(): Metric[] {
    return [this.attempts, this.latency, this.lag, this.oldest];
  }
}
