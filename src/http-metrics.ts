/**
 * The HTTP series of `/metrics`: responses by method, route pattern and status, and their
 * durations as a histogram, kept as plain numbers and written out in Prometheus' text format only
 * when scraped.
 *
 * Why not prom-client's `Counter` and `Histogram` here, as for every other series: they validate
 * and hash the label values on every `inc()` and `observe()`, label children included, and build
 * the hash as a new string. On a cached page-1 request that was about 4% of the server's work (4.8%
 * of the samples of a `perf` profile; 9,000 of 250,000 instructions per request under callgrind,
 * docs/performance.md). Counting a response here is two map lookups and a few additions.
 */

/** Upper bounds of the duration buckets, in seconds. */
export const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5] as const;

const REQUESTS = {
  name: 'http_requests_total',
  help: 'HTTP responses sent, by method, route pattern and status code',
};
const DURATION = {
  name: 'http_request_duration_seconds',
  help: 'Time from request to response, by route pattern',
};

/** One method and route pattern: responses per status code, and the duration histogram. */
class RouteSeries {
  readonly byStatus = new Map<number, number>();
  /** Responses per bucket (not cumulative); the last one is `+Inf`. */
  readonly buckets = new Float64Array(DURATION_BUCKETS.length + 1);
  sum = 0;
  count = 0;

  readonly labels: string;

  constructor(labels: string) {
    this.labels = labels;
  }

  record(status: number, seconds: number): void {
    this.byStatus.set(status, (this.byStatus.get(status) ?? 0) + 1);
    let bucket = 0;
    while (bucket < DURATION_BUCKETS.length && seconds > (DURATION_BUCKETS[bucket] as number)) bucket += 1;
    this.buckets[bucket] = (this.buckets[bucket] as number) + 1;
    this.sum += seconds;
    this.count += 1;
  }
}

/** A label value as the text format writes it: backslash, double quote and line feed escaped. */
function labelValue(value: string): string {
  return `"${value.replace(/[\\"\n]/g, (c) => (c === '\n' ? '\\n' : `\\${c}`))}"`;
}

/** A sample value as the text format writes it. */
function sampleValue(value: number): string {
  return value === Infinity ? '+Inf' : String(value);
}

export class HttpMetrics {
  // Route pattern → method → series. Both keys come from small fixed sets (the route table, and
  // the methods Node's parser accepts), never from the raw URL, so the maps stay bounded.
  private readonly routes = new Map<string, Map<string, RouteSeries>>();
  /** Responses counted, in all. */
  responses = 0;

  /** Counts one response of `method` on `route` (a route pattern, or `unmatched`). */
  record(method: string, route: string, status: number, seconds: number): void {
    this.responses += 1;
    let byMethod = this.routes.get(route);
    if (byMethod === undefined) {
      byMethod = new Map();
      this.routes.set(route, byMethod);
    }
    let series = byMethod.get(method);
    if (series === undefined) {
      series = new RouteSeries(`method=${labelValue(method)},route=${labelValue(route)}`);
      byMethod.set(method, series);
    }
    series.record(status, seconds);
  }

  /** Both families in Prometheus' text format (version 0.0.4), each line ending in a line feed. */
  text(): string {
    const all = [...this.routes.values()].flatMap((byMethod) => [...byMethod.values()]);
    const lines = [
      `# HELP ${REQUESTS.name} ${REQUESTS.help}`,
      `# TYPE ${REQUESTS.name} counter`,
      ...all.flatMap((series) =>
        [...series.byStatus].map(
          ([status, count]) => `${REQUESTS.name}{${series.labels},status_code="${status}"} ${count}`,
        ),
      ),
      `# HELP ${DURATION.name} ${DURATION.help}`,
      `# TYPE ${DURATION.name} histogram`,
    ];
    for (const series of all) {
      let cumulative = 0;
      [...DURATION_BUCKETS, Infinity].forEach((bound, i) => {
        cumulative += series.buckets[i] as number;
        lines.push(`${DURATION.name}_bucket{${series.labels},le="${sampleValue(bound)}"} ${cumulative}`);
      });
      lines.push(`${DURATION.name}_sum{${series.labels}} ${sampleValue(series.sum)}`);
      lines.push(`${DURATION.name}_count{${series.labels}} ${series.count}`);
    }
    return `${lines.join('\n')}\n`;
  }
}
