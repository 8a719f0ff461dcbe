/**
 * Operating the server (decisions.md "Pages and operations"): the route declarations of `GET /healthz`
 * (alive), `GET /readyz` (content snapshot loaded, state store and Redis reachable when configured;
 * 503 naming what is missing) and `GET /metrics` (Prometheus text, prom-client: with METRICS_TOKEN on
 * the main port, or on its own METRICS_PORT listener) — never rate limited, never in the access log —
 * and the metrics registry, with the registry of requests in flight that the gauges and the graceful
 * shutdown read. Requests are counted and timed by the route declaration that answered them.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import { Counter, collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import { z } from 'zod';
import type { ContentStore } from './content.ts';
import { envelope, HttpError } from './errors.ts';
import { JSON_TYPE } from './http-conditional.ts';
import { CORS_HEADERS } from './middleware/cors.ts';
import type { RequestObserver } from './middleware/observe.ts';
import { REQUEST_ID_HEADER, requestIdOf } from './middleware/request-id.ts';
import type { PresenceHub } from './presence/hub.ts';
import { RequestMetrics } from './request-metrics.ts';
import type { RouteTable } from './route-table.ts';
import type { StateStore } from './state/store.ts';
import type { MuseumContext, PreparedResponse } from './types.ts';
import { upstreamEvents } from './upstream/http.ts';

const CHECK_TIMEOUT_MS = 1_000;

/**
 * prom-client's process metrics (CPU, memory, GC, event-loop delay: its max since the last scrape is
 * what shows a long task), once per process: they describe the process, not one server in it.
 */
let processRegistry: Registry | null = null;
function processMetrics(): Registry {
  if (processRegistry === null) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}
/** Readiness responses are reused this long: load balancers probing hard cost one check a second. */
const READY_CACHE_MS = 1_000;

export interface OperationsDeps {
  content: ContentStore;
  state: StateStore;
  redis: Redis | null;
  presence: PresenceHub;
}

export class Operations implements RequestObserver {
  readonly registry = new Registry();
  /** Requests not yet answered (what a graceful shutdown waits for). */
  readonly inFlight = new Set<MuseumContext>();
  private readonly requests = new RequestMetrics(this.registry);
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
    this.refusals = new Counter({
      name: 'museum_rate_limit_refusals_total',
      help: 'Requests refused with 429 (per-key, per-IP and registration limits), by route',
      labelNames: ['route'],
      registers,
    });
    this.upstreamCalls = new Counter({
      name: 'museum_upstream_calls_total',
      help: 'Calls made to upstream services, by upstream',
      labelNames: ['upstream'],
      registers,
    });
    this.upstreamFailures = new Counter({
      name: 'museum_upstream_failures_total',
      help: 'Upstream calls that failed, by upstream and reason (timeout, network, status, body)',
      labelNames: ['upstream', 'reason'],
      registers,
    });
    upstreamEvents.subscribe(this.onUpstream);
    const inFlight = this.inFlight;
    new Gauge({
      name: 'museum_presence_listeners',
      help: 'Presence stream listeners connected to this instance',
      registers,
      collect() {
        this.set(deps.presence.size);
      },
    });
    new Gauge({
      name: 'museum_sse_streams_open',
      help: 'Server-sent event streams open on this instance (presence, Library)',
      registers,
      collect() {
        let open = 0;
        for (const ctx of inFlight) {
          const response = ctx.state.route?.response;
          if (response && 'sse' in response && ctx.res.headersSent) open++;
        }
        this.set(open);
      },
    });
    new Gauge({
      name: 'museum_http_requests_in_flight',
      help: 'Requests being answered (streams included)',
      registers,
      collect() {
        this.set(inFlight.size);
      },
    });
    new Gauge({
      name: 'museum_bake_info',
      help: 'The published bake this instance serves (value 1)',
      labelNames: ['bake_id'],
      registers,
      collect() {
        this.reset();
        this.set({ bake_id: deps.content.snapshot.manifest.bake_id }, 1);
      },
    });
  }

  /** Stop listening to process-wide events (server close). */
  close(): void {
    upstreamEvents.unsubscribe(this.onUpstream);
  }

  /** A request answered by `route` (its declared path). */
  record(route: string, method: string, status: number, seconds: number): void {
    this.requests.record(route, method, status, seconds);
    if (status === 429) this.refusals.inc({ route });
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
      const state = await withTimeout(this.deps.state.check(), CHECK_TIMEOUT_MS).then(
        () => null,
        () => 'unreachable',
      );
      if (state) problems.push(`state store (${this.deps.state.backend === 'postgres' ? 'DATABASE_URL' : 'STATE_DB'}) ${state}`);
      if (this.deps.redis) {
        const pong = await withTimeout(this.deps.redis.ping(), CHECK_TIMEOUT_MS).then(
          () => true,
          () => false,
        );
        if (!pong) problems.push('Redis (REDIS_URL) unreachable');
      }
      return problems;
    })();
    this.ready = { at: now, missing };
    return missing;
  }

  /** The Prometheus text of this server's metrics and the process's. */
  metricsText(): Promise<string> {
    return Registry.merge([processMetrics(), this.registry]).metrics();
  }

  async writeMetrics(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const text = await this.metricsText();
    res.writeHead(200, {
      'Content-Type': this.registry.contentType,
      'Cache-Control': 'no-store',
      [REQUEST_ID_HEADER]: requestIdOf(req.headers['x-request-id']),
    });
    res.end(req.method === 'HEAD' ? undefined : text);
  }

  /** The METRICS_PORT listener: /metrics only (no token: keep that port private). */
  async listenMetrics(port: number, host: string): Promise<Server> {
    const server = createServer((req, res) => {
      const path = (req.url ?? '').split('?')[0];
      if ((req.method === 'GET' || req.method === 'HEAD') && path === '/metrics') void this.writeMetrics(req, res);
      else writeJson(req, res, 404, envelope('Not found', 'NOT_FOUND'));
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

function writeJson(req: IncomingMessage, res: ServerResponse, status: number, body: unknown): void {
  const bytes = Buffer.from(JSON.stringify(body));
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': bytes.length,
    'Cache-Control': 'no-store',
    ...CORS_HEADERS,
    // The caller's id when it sent a sane one, as every other response does.
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

/** Responses of the operations endpoints are never cached by anyone. */
const NO_STORE = { 'Cache-Control': 'no-store' } as const;
const ok = (body: unknown): PreparedResponse => ({
  status: 200,
  headers: { 'Content-Type': JSON_TYPE },
  body: Buffer.from(JSON.stringify(body)),
});
const Status = z.object({ status: z.string() });

/**
 * `/healthz`, `/readyz` and (with METRICS_TOKEN, METRICS_PORT unset) `/metrics` on the main port: public
 * probes and a bearer-token scrape, none rate limited, none in the access log or the request metrics.
 */
export function operationRoutes(table: RouteTable, operations: Operations, metricsToken: string | undefined): void {
  const common = { method: 'GET', tag: 'operations', headers: NO_STORE, logged: false, documented: false } as const;
  table.route({
    ...common,
    path: '/healthz',
    operationId: 'health',
    summary: 'Alive (503 while shutting down)',
    access: 'public',
    response: { json: Status },
    handler: () => {
      if (operations.draining) throw SHUTTING_DOWN;
      return ok({ status: 'ok' });
    },
  });
  table.route({
    ...common,
    path: '/readyz',
    operationId: 'ready',
    summary: 'Ready to serve: a bake published, the state store and Redis reachable (503 naming what is missing)',
    access: 'public',
    response: { json: Status },
    async handler() {
      const missing = await operations.readiness();
      if (missing.length > 0) throw new HttpError(503, 'UNAVAILABLE', `Not ready: ${missing.join('; ')}`);
      return ok({ status: 'ready' });
    },
  });
  if (metricsToken === undefined) return;
  table.route({
    ...common,
    path: '/metrics',
    operationId: 'metrics',
    summary: 'Prometheus text',
    access: { bearer: metricsToken },
    response: { binary: 'text/plain', description: 'Prometheus exposition format' },
    async handler(ctx) {
      ctx.type = operations.registry.contentType;
      ctx.body = await operations.metricsText();
    },
  });
}

const SHUTTING_DOWN = new HttpError(503, 'UNAVAILABLE', 'Shutting down');
