/**
 * Requests answered and their latency, by route declaration and method (and status for the count),
 * counted in plain maps and arrays that prom-client reads and formats only when /metrics is scraped:
 * prom-client's own `inc`/`observe` hash their labels on every call (~1–2 µs a request here,
 * bench/RESULTS.md). Registered as the registry's metrics `museum_http_requests_total` and
 * `museum_http_request_duration_seconds`.
 */
import type { MetricObjectWithValues, MetricValue, MetricValueWithName, Registry } from 'prom-client';

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
/** Seconds; the last bucket is +Inf. */
const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** One (route, method): answers by status, and the latency histogram. */
interface RouteMethod {
  route: string;
  method: string;
  statuses: Map<number, number>;
  /** Observations per bucket (not cumulative); index BUCKETS.length is +Inf. */
  buckets: Float64Array;
  sum: number;
  count: number;
}

/** Requests answered and their latency, by route declaration, method (and status for the count). */
export class RequestMetrics {
  /** route → method → cell. Routes are declarations and methods a fixed set: bounded by design. */
  private readonly cells = new Map<string, Map<string, RouteMethod>>();

  record(route: string, rawMethod: string | undefined, status: number, seconds: number): void {
    const method = rawMethod !== undefined && METHODS.has(rawMethod) ? rawMethod : 'other';
    let byMethod = this.cells.get(route);
    if (byMethod === undefined) this.cells.set(route, (byMethod = new Map()));
    let cell = byMethod.get(method);
    if (cell === undefined) {
      cell = { route, method, statuses: new Map(), buckets: new Float64Array(BUCKETS.length + 1), sum: 0, count: 0 };
      byMethod.set(method, cell);
    }
    cell.statuses.set(status, (cell.statuses.get(status) ?? 0) + 1);
    let bucket = 0;
    while (bucket < BUCKETS.length && seconds > BUCKETS[bucket]!) bucket++;
    cell.buckets[bucket]!++;
    cell.sum += seconds;
    cell.count++;
  }

  /** Register the request counter and the latency histogram with `registry` (formatted by prom-client). */
  register(registry: Registry): void {
    const cells = () => [...this.cells.values()].flatMap((byMethod) => [...byMethod.values()]);
    const metric = (
      name: string,
      help: string,
      type: 'counter' | 'histogram',
      values: () => Array<MetricValue<string> | MetricValueWithName<string>>,
    ) => ({
      name,
      help,
      type,
      aggregator: 'sum' as const,
      get: async (): Promise<MetricObjectWithValues<MetricValue<string>>> =>
        ({ name, help, type, aggregator: 'sum', values: values() }) as never,
      reset: () => this.cells.clear(),
    });
    registry.registerMetric(
      metric('museum_http_requests_total', 'HTTP requests answered, by route declaration, method and status', 'counter', () =>
        cells().flatMap((c) => [...c.statuses].map(([status, value]) => ({ labels: { route: c.route, method: c.method, status }, value }))),
      ) as never,
    );
    const name = 'museum_http_request_duration_seconds';
    registry.registerMetric(
      metric(name, 'Time to answer an HTTP request (to the end of the response), by route declaration', 'histogram', () =>
        cells().flatMap((c) => {
          let cumulative = 0;
          const buckets = [...BUCKETS, '+Inf' as const].map((le, i) => {
            cumulative += c.buckets[i]!;
            return { labels: { le, route: c.route, method: c.method }, value: cumulative, metricName: `${name}_bucket` };
          });
          return [
            ...buckets,
            { labels: { route: c.route, method: c.method }, value: c.sum, metricName: `${name}_sum` },
            { labels: { route: c.route, method: c.method }, value: c.count, metricName: `${name}_count` },
          ];
        }),
      ) as never,
    );
  }
}
