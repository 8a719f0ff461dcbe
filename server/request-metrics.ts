/**
 * Per-request bookkeeping at the cost of a few field writes: the server's response class knows when
 * its request started and which route declaration answers it, and reports its own close; requests
 * are counted and timed in plain arrays that prom-client reads and formats only when /metrics is
 * scraped. (prom-client's own `labels().observe()` hashes its labels on every call, and a `close`
 * listener per response allocates a wrapper: together a fifth of the server's own CPU per fast-path
 * answer, bench/serve.ts.)
 */
import { IncomingMessage, ServerResponse } from 'node:http';
import type { MetricObjectWithValues, MetricValue, MetricValueWithName, Registry } from 'prom-client';

/** Receives each tracked response once, when it closes (finished, or its connection gone). */
export interface ResponseTracker {
  closed(res: MuseumResponse): void;
}

/** node constructs responses with (req, { highWaterMark, … }); its typings declare (req) alone. */
const ServerResponseWithOptions = ServerResponse as unknown as new <R extends IncomingMessage>(req: R, options?: object) => ServerResponse<R>;

/** http.createServer's `ServerResponse` class for the museum server. */
export class MuseumResponse<Request extends IncomingMessage = IncomingMessage> extends ServerResponseWithOptions<Request> {
  /** The class as createServer's `ServerResponse` option types it. */
  static readonly asServerOption = MuseumResponse as unknown as typeof ServerResponse;

  /** performance.now() when the request arrived (the access line's and the latency's start). */
  declare readonly startedAt: number;
  /** The route declaration answering this request (`/v1/rooms/{id}/slots`): metrics label by it. */
  declare route: string | undefined;
  declare tracker: ResponseTracker | null;
  /** Its index in the InFlight registry while it is there, else -1. */
  declare inFlightAt: number;

  // Plain assignments after super(), not class-field initializers: in a process whose response
  // shapes V8 has had to rebuild (full GCs between its first requests — reproduced by forcing them),
  // the fields' define-semantics initializer alone took ~1.6 µs per response; assigned, 0.7 µs, and
  // the whole answer 10 % less CPU (35.5 → 32 µs; an undisturbed process is unchanged at ~19 µs).
  constructor(req: Request, options?: object) {
    super(req, options);
    (this as { startedAt: number }).startedAt = performance.now();
    this.route = undefined;
    this.tracker = null;
    this.inFlightAt = -1;
  }

  // `arguments` passed on as they came: a rest parameter and a spread would allocate an array on
  // each of the three or four events of every response.
  override emit(event: string | symbol): boolean {
    if (event === 'close' && this.tracker !== null) {
      const tracker = this.tracker;
      this.tracker = null;
      tracker.closed(this);
    }
    // eslint-disable-next-line prefer-rest-params
    return ServerResponse.prototype.emit.apply(this, arguments as unknown as [string | symbol, ...unknown[]]);
  }
}

/**
 * The responses in flight (what a graceful shutdown waits for and the gauges count): an array, each
 * response holding its index, removed by moving the last one into its place. Not a Set: with
 * responses that wait (on Redis, say), a Set here got every response promoted to the old generation
 * (measured: 1.7 MB promoted per 12 MB allocated, scavenges 3.4 ms instead of 0.6, ~4 µs more CPU
 * per request in bench/serve.ts "artworks (Redis)"; without the Set, nothing). A 30-line node:http
 * server that answers a turn later reproduces it with a Set of its ServerResponse objects, and not
 * with a Set of plain tokens or of sockets; why is not pinned down. The array measured clean.
 */
export class InFlight implements Iterable<MuseumResponse> {
  private readonly responses: MuseumResponse[] = [];

  add(res: MuseumResponse): void {
    if (res.inFlightAt >= 0) return;
    res.inFlightAt = this.responses.length;
    this.responses.push(res);
  }

  delete(res: MuseumResponse): void {
    const at = res.inFlightAt;
    if (at < 0 || this.responses[at] !== res) return;
    const last = this.responses.pop()!;
    if (last !== res) {
      this.responses[at] = last;
      last.inFlightAt = at;
    }
    res.inFlightAt = -1;
  }

  get size(): number {
    return this.responses.length;
  }

  /** A copy: a caller may end responses (removing them) while it walks. */
  [Symbol.iterator](): Iterator<MuseumResponse> {
    return [...this.responses][Symbol.iterator]();
  }
}

/** When the request started: the response's arrival time, or now for responses of other servers. */
export const startedAt = (res: ServerResponse): number => (res instanceof MuseumResponse ? res.startedAt : performance.now());

/** Label a response with the route declaration that answers it. */
export const labelRoute = (res: ServerResponse, route: string): void => {
  if (res instanceof MuseumResponse) res.route = route;
};

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
    const metric = (name: string, help: string, type: 'counter' | 'histogram', values: () => Array<MetricValue<string> | MetricValueWithName<string>>) => ({
      name,
      help,
      type,
      aggregator: 'sum' as const,
      get: async (): Promise<MetricObjectWithValues<MetricValue<string>>> => ({ name, help, type, aggregator: 'sum', values: values() } as never),
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
