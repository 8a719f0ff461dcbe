/**
 * Operating the server (decisions.md "Pages and operations"): `GET /healthz` (alive), `GET /readyz`
 * (content snapshot loaded, state store and Redis reachable when configured; 503 naming what is
 * missing), `GET /metrics` (Prometheus text, prom-client) — answered before Koa, so they are cheap,
 * never rate limited and never in the access log — and the registry of requests in flight that the
 * metrics and the graceful shutdown read.
 *
 * Metrics stay cheap on the hot path (server/request-metrics.ts): a response reports its own close,
 * and is counted and timed in plain arrays read at scrape time; routes are labelled by their
 * declaration (Koa's matched path, or the fast path's route), never by raw URL.
 */
import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import { Counter, Gauge, Registry } from 'prom-client';
import type { ContentStore } from './content.ts';
import { envelope } from './errors.ts';
import { CORS_HEADERS } from './middleware/cors.ts';
import { REQUEST_ID_HEADER, requestIdOf } from './middleware/request-id.ts';
import { InFlight, type MuseumResponse, RequestMetrics, type ResponseTracker } from './request-metrics.ts';
import type { StateStore } from './state/store.ts';
import { upstreamEvents } from './upstream/http.ts';

const CHECK_TIMEOUT_MS = 1_000;
/** Readiness answers are reused this long: load balancers probing hard cost one check a second. */
const READY_CACHE_MS = 1_000;

export interface OperationsDeps {
  content: ContentStore;
  state: StateStore;
  redis: Redis | null;
  metricsToken?: string;
}

export class Operations implements ResponseTracker {
  readonly registry = new Registry();
  /** Responses not yet finished or closed (what a graceful shutdown waits for). */
  readonly inFlight = new InFlight();
  private readonly requests = new RequestMetrics();
  private readonly refusals: Counter<'route'>;
  private readonly upstreamCalls: Counter<'upstream'>;
  private readonly upstreamFailures: Counter<'upstream' | 'reason'>;
  private readonly onUpstream = (message: unknown) => {
    const { upstream, failure } = message as { upstream: string; failure?: string };
    if (failure) this.upstreamFailures.inc({ upstream, reason: failure });
    else this.upstreamCalls.inc({ upstream });
  };
  private ready: { at: number; missing: Promise<string[]> } | null = null;
  draining = false;

  constructor(private readonly deps: OperationsDeps) {
    const registers = [this.registry];
    this.requests.register(this.registry);
    this.refusals = new Counter({ name: 'museum_rate_limit_refusals_total', help: 'Requests refused with 429 (per-key, per-IP and registration limits), by route', labelNames: ['route'], registers });
    this.upstreamCalls = new Counter({ name: 'museum_upstream_calls_total', help: 'Calls made to upstream services, by upstream', labelNames: ['upstream'], registers });
    this.upstreamFailures = new Counter({
      name: 'museum_upstream_failures_total',
      help: 'Upstream calls that failed, by upstream and reason (timeout, network, status, body)',
      labelNames: ['upstream', 'reason'],
      registers,
    });
    upstreamEvents.subscribe(this.onUpstream);
    const inFlight = this.inFlight;
    new Gauge({ name: 'museum_presence_listeners', help: 'Presence stream listeners connected to this instance', registers, collect() {
      let listeners = 0;
      for (const res of inFlight) if (isEventStream(res) && res.req?.url?.startsWith('/v1/presence/')) listeners++;
      this.set(listeners);
    } });
    new Gauge({ name: 'museum_sse_streams_open', help: 'Server-sent event streams open on this instance (presence, Library)', registers, collect() {
      let open = 0;
      for (const res of inFlight) if (isEventStream(res)) open++;
      this.set(open);
    } });
    new Gauge({ name: 'museum_http_requests_in_flight', help: 'Requests being answered (streams included)', registers, collect() {
      this.set(inFlight.size);
    } });
    new Gauge({ name: 'museum_bake_info', help: 'The published bake this instance serves (value 1)', labelNames: ['bake_id'], registers, collect() {
      this.reset();
      this.set({ bake_id: deps.content.snapshot.manifest.bake_id }, 1);
    } });
  }

  /** Stop listening to process-wide events (server close). */
  close(): void {
    upstreamEvents.unsubscribe(this.onUpstream);
  }

  /** Track a request until its response finishes or its connection closes. */
  observe(res: MuseumResponse): void {
    this.inFlight.add(res);
    res.tracker = this;
  }

  closed(res: MuseumResponse): void {
    this.inFlight.delete(res);
    const route = res.route;
    if (route === undefined) return; // operations endpoints, unmatched paths
    this.requests.record(route, res.req.method, res.statusCode, (performance.now() - res.startedAt) / 1000);
    if (res.statusCode === 429) this.refusals.inc({ route });
  }

  /** Answer /healthz, /readyz and (on the main port, with the token) /metrics; false for anything else. */
  handle(req: IncomingMessage, res: ServerResponse): boolean {
    const url = req.url;
    // Every request passes here first: API and file paths (`/v1/…`, `/files/…`, `/view/…`) leave at the first letter.
    const first = url?.charCodeAt(1);
    if (url === undefined || (first !== 104 && first !== 114 && first !== 109) /* h r m */ || (req.method !== 'GET' && req.method !== 'HEAD')) return false;
    const path = url.indexOf('?') < 0 ? url : url.slice(0, url.indexOf('?'));
    if (path === '/healthz') {
      send(req, res, this.draining ? 503 : 200, this.draining ? envelope('Shutting down', 'UNAVAILABLE') : { status: 'ok' });
      return true;
    }
    if (path === '/readyz') {
      void this.readiness().then((missing) =>
        missing.length === 0
          ? send(req, res, 200, { status: 'ready' })
          : send(req, res, 503, envelope(`Not ready: ${missing.join('; ')}`, 'UNAVAILABLE')),
      );
      return true;
    }
    if (path === '/metrics' && this.deps.metricsToken !== undefined) {
      if (!bearerMatches(req.headers.authorization, this.deps.metricsToken)) {
        send(req, res, 401, envelope('Metrics need Authorization: Bearer <METRICS_TOKEN>', 'UNAUTHORIZED'));
        return true;
      }
      void this.writeMetrics(req, res);
      return true;
    }
    return false;
  }

  /** What keeps this instance from serving (empty when ready). */
  readiness(): Promise<string[]> {
    // Draining answers at once: a cached "ready" must not outlive the shutdown signal.
    if (this.draining) return Promise.resolve(['shutting down']);
    const now = Date.now();
    if (this.ready && now - this.ready.at < READY_CACHE_MS) return this.ready.missing;
    const missing = (async () => {
      const problems: string[] = [];
      if (this.deps.content.snapshot.manifest.bake_id === 'none') problems.push('no bake published in DATA_DIR');
      const state = await withTimeout(this.deps.state.check(), CHECK_TIMEOUT_MS).then(() => null, () => 'unreachable');
      if (state) problems.push(`state store (${this.deps.state.backend === 'postgres' ? 'DATABASE_URL' : 'STATE_DB'}) ${state}`);
      if (this.deps.redis) {
        const pong = await withTimeout(this.deps.redis.ping(), CHECK_TIMEOUT_MS).then(() => true, () => false);
        if (!pong) problems.push('Redis (REDIS_URL) unreachable');
      }
      return problems;
    })();
    this.ready = { at: now, missing };
    return missing;
  }

  async writeMetrics(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const text = await this.registry.metrics();
    res.writeHead(200, { 'Content-Type': this.registry.contentType, 'Cache-Control': 'no-store', [REQUEST_ID_HEADER]: requestIdOf(req.headers['x-request-id']) });
    res.end(req.method === 'HEAD' ? undefined : text);
  }

  /** The METRICS_PORT listener: /metrics only (no token: keep that port private). */
  async listenMetrics(port: number, host: string): Promise<Server> {
    const server = createServer((req, res) => {
      const path = (req.url ?? '').split('?')[0];
      if ((req.method === 'GET' || req.method === 'HEAD') && path === '/metrics') void this.writeMetrics(req, res);
      else send(req, res, 404, envelope('Not found', 'NOT_FOUND'));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    return server;
  }

  /** The port the METRICS_PORT listener got (tests ask for 0). */
  static portOf(server: Server): number {
    return (server.address() as AddressInfo).port;
  }
}

const isEventStream = (res: ServerResponse): boolean => {
  const type = res.getHeader('content-type');
  return typeof type === 'string' && type.startsWith('text/event-stream');
};

function bearerMatches(header: string | undefined, token: string): boolean {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  if (!match) return false;
  const a = Buffer.from(match[1]!);
  const b = Buffer.from(token);
  // Constant time for equal lengths; the length of a token is no secret worth the complexity.
  return a.length === b.length && timingSafeEqual(a, b);
}

function send(req: IncomingMessage, res: ServerResponse, status: number, body: unknown): void {
  const bytes = Buffer.from(JSON.stringify(body));
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': bytes.length,
    'Cache-Control': 'no-store',
    ...CORS_HEADERS,
    // The caller's id when it sent a sane one, as every other answer does.
    [REQUEST_ID_HEADER]: requestIdOf(req.headers['x-request-id']),
  });
  res.end(req.method === 'HEAD' ? undefined : bytes);
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('timed out')), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
