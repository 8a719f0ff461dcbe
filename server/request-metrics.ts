/**
 * Requests answered and their latency, by route declaration (its declared path, never the raw URL)
 * and method (and status for the count): prom-client's own Counter and Histogram, registered as
 * `museum_http_requests_total` and `museum_http_request_duration_seconds`.
 */
import { Counter, Histogram, type Registry } from 'prom-client';

/** Any other method is counted as `other`, so a client cannot mint label values. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
/** Seconds (prom-client adds +Inf). */
const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export class RequestMetrics {
  private readonly answered: Counter<'route' | 'method' | 'status'>;
  private readonly latency: Histogram<'route' | 'method'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.answered = new Counter({
      name: 'museum_http_requests_total',
      help: 'HTTP requests answered, by route declaration, method and status',
      labelNames: ['route', 'method', 'status'],
      registers,
    });
    this.latency = new Histogram({
      name: 'museum_http_request_duration_seconds',
      help: 'Time to answer an HTTP request (to the end of the response), by route declaration',
      labelNames: ['route', 'method'],
      buckets: BUCKETS,
      registers,
    });
  }

  record(route: string, rawMethod: string, status: number, seconds: number): void {
    const method = METHODS.has(rawMethod) ? rawMethod : 'other';
    this.answered.inc({ route, method, status });
    this.latency.observe({ route, method }, seconds);
  }
}
