/**
 * The server factory: builds the Koa app and its services from a validated Config, so tests
 * start real servers on ephemeral ports. Middleware, one job each, outermost first:
 * request id + client IP → access log → CORS → error envelope → routes (auth, limits and
 * validation are attached per route by `Api`). Immutable artifacts are answered by the fast path
 * before Koa is entered; /healthz, /readyz and /metrics before both (server/operations.ts).
 *
 * Two ways to stop: `close()` at once (tests), and `shutdown()` — the one graceful sequence
 * (SIGTERM): readiness fails and every response says `Connection: close`, event streams end with a
 * `retry:` hint (clients reconnect to another instance), the listener closes after a short delay
 * (load balancers see /readyz fail first) once new connections pause, requests in flight are
 * answered (bounded), then the `onShutdown('flush')` hooks run (e.g. a buffered log) and the
 * services and pools close.
 */
import { createServer, type Server } from 'node:http';
import { type AddressInfo, Server as NetServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import Koa from 'koa';
import type { Logger } from 'pino';
import { Api } from './api.ts';
import { flushLog, serverLog } from './log.ts';
import type { Config } from './config.ts';
import { AccessLog, accessLog } from './middleware/access-log.ts';
import { guardConnections, refusedBeforeRouting, serverOptions } from './middleware/connections.ts';
import { compressAnswers } from './middleware/compress.ts';
import { cors } from './middleware/cors.ts';
import { fileResponseHeaders } from './middleware/file-headers.ts';
import { clientErrorResponder, errorEnvelope } from './middleware/errors.ts';
import type { RateLimitStore } from './middleware/rate-limit.ts';
import { requestContext } from './middleware/request-id.ts';
import { Operations } from './operations.ts';
import { type InFlight, labelRoute, MuseumResponse } from './request-metrics.ts';
import { ROUTE_MODULES } from './routes/index.ts';
import { type BuiltServices, buildServices } from './services.ts';
import type { FastPathHandler, MuseumState, Services } from './types.ts';

export interface MuseumServer {
  url: string;
  port: number;
  server: Server;
  app: Koa<MuseumState>;
  services: Services;
  /** Health, readiness, metrics and the requests in flight. */
  operations: Operations;
  /** The METRICS_PORT listener's port, when METRICS_PORT is set. */
  metricsPort?: number;
  /** Stop at once: connections are cut (tests). */
  close(): Promise<void>;
  /** Stop gracefully (SIGTERM): see the module comment. Resolves when everything is closed. */
  shutdown(options?: { drainDelayMs?: number; graceMs?: number }): Promise<void>;
}

/** Defaults of the graceful shutdown: how long readiness fails before the listener closes, how long requests in flight get, the streams' reconnect hint. */
export const SHUTDOWN = { drainDelayMs: 500, graceMs: 10_000, retryMs: 1_000 } as const;

export interface ServerOptions {
  log?: Logger;
  limiter?: RateLimitStore;
}

export async function startServer(config: Config, options: ServerOptions = {}): Promise<MuseumServer> {
  const log = options.log ?? serverLog(config.logLevel);
  const services = await buildServices(config, log, { limiter: options.limiter });
  try {
    return await serveWith(config, services, log);
  } catch (err) {
    // A server that cannot start (port taken, say) closes what it opened, so `museum serve` exits.
    await services.close();
    await services.state.close();
    throw err;
  }
}

/** The listening server over built services; on failure nothing of its own is left open. */
async function serveWith(config: Config, services: BuiltServices, log: Logger): Promise<MuseumServer> {
  const { keys, limiter } = services;

  // One access-line writer for both paths, so their lines keep one order.
  const access = new AccessLog(log);
  const api = new Api({ keys, limiter, access });
  for (const register of ROUTE_MODULES) register(api, services);
  const fastPath = api.fastPath();
  const { content, state, redis } = services;
  const operations = new Operations({ content, state, redis, metricsToken: config.metricsPort === undefined ? config.metricsToken : undefined });

  const app = koaApp(config, api, access);
  const { server, lastConnectionAt } = nodeServer(config, operations, fastPath, app.callback(), log);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;

  const metricsServer =
    config.metricsPort === undefined
      ? null
      : await operations.listenMetrics(config.metricsPort, config.metricsHost).catch((err: unknown) => {
          operations.close();
          server.close();
          throw err;
        });
  const running: Running = { server, services, operations, metricsServer, log, lastConnectionAt };
  let closing: Promise<void> | null = null;
  return {
    url: `http://${host}:${port}`,
    port,
    server,
    app,
    services,
    operations,
    metricsPort: metricsServer ? Operations.portOf(metricsServer) : undefined,
    close() {
      closing ??= closeAtOnce(running);
      return closing;
    },
    shutdown({ drainDelayMs = SHUTDOWN.drainDelayMs, graceMs = SHUTDOWN.graceMs } = {}) {
      closing ??= shutDownGracefully(running, drainDelayMs, graceMs);
      return closing;
    },
  };
}

/** The Koa app: the middleware stack of the module comment, outermost first, then the routes. */
function koaApp(config: Config, api: Api, access: AccessLog): Koa<MuseumState> {
  const { log } = access;
  const app = new Koa<MuseumState>();
  app.silent = true;
  app.on('error', (err: NodeJS.ErrnoException) => {
    // Clients that hang up mid-stream are normal (SSE, aborted downloads).
    // A stream ended by a shutdown may still be written to by its source once.
    if (['ERR_STREAM_PREMATURE_CLOSE', 'ECONNRESET', 'EPIPE', 'ERR_STREAM_WRITE_AFTER_END', 'ERR_STREAM_DESTROYED'].includes(err.code ?? '')) return;
    log.error({ err }, 'koa error');
  });
  app.use(requestContext({ trustProxy: config.trustProxy }));
  app.use(accessLog(access));
  app.use(fileResponseHeaders());
  app.use(cors());
  app.use(compressAnswers());
  app.use(errorEnvelope(log));
  app.use(async function routeLabel(ctx, next) {
    try {
      await next();
    } finally {
      // Label by the route Koa matched (metrics), never by raw URL; `:id` written as declared, `{id}`.
      if (ctx._matchedRoute !== undefined) labelRoute(ctx.res, declaredPath(String(ctx._matchedRoute)));
    }
  });
  app.use(api.router.routes());
  app.use(api.router.allowedMethods());
  return app;
}

/**
 * The node server, not yet listening: the operations endpoints first, then the fast path, then Koa;
 * with its guards. `lastConnectionAt` is when the last connection arrived while draining.
 */
function nodeServer(
  config: Config,
  operations: Operations,
  fastPath: FastPathHandler,
  koaHandler: ReturnType<Koa<MuseumState>['callback']>,
  log: Logger,
): { server: Server; lastConnectionAt: () => number } {
  const server = createServer({ ...serverOptions(config), ServerResponse: MuseumResponse.asServerOption }, (req, res) => {
    if (refusedBeforeRouting(req, res)) return;
    if (operations.handle(req, res)) return;
    operations.observe(res as MuseumResponse);
    if (operations.draining) res.setHeader('Connection', 'close');
    if (!fastPath(req, res)) void koaHandler(req, res);
  });
  server.on('clientError', clientErrorResponder());
  let lastConnectionAt = 0;
  server.on('connection', () => {
    if (operations.draining) lastConnectionAt = Date.now();
  });
  server.keepAliveTimeout = 65_000;
  // Bounded time to receive a request (not its response: streams run for minutes), connections per IP.
  guardConnections(server, config, log);
  return { server, lastConnectionAt: () => lastConnectionAt };
}

/** A listening server and what closes with it. */
interface Running {
  server: Server;
  services: BuiltServices;
  operations: Operations;
  /** The METRICS_PORT listener, when METRICS_PORT is set. */
  metricsServer: Server | null;
  log: Logger;
  lastConnectionAt: () => number;
}

/** Stop at once: connections are cut (tests). */
async function closeAtOnce(running: Running): Promise<void> {
  const { server, services, log } = running;
  await services.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await release(running);
  await flushLog(log);
}

/** The graceful shutdown (SIGTERM), step by step as the module comment tells it. */
async function shutDownGracefully(running: Running, drainDelayMs: number, graceMs: number): Promise<void> {
  const { server, services, operations, log, lastConnectionAt } = running;
  const started = Date.now();
  operations.draining = true;
  const endStreams = async () => {
    await services.shutdown('drain');
    endEventStreams(operations.inFlight, SHUTDOWN.retryMs);
  };
  await endStreams();
  // Still accepting for a moment: a load balancer may route here until it sees /readyz fail.
  await sleep(drainDelayMs);
  // Closing a listener resets connections still in its accept queue: wait (bounded) until
  // new connections stop arriving, as they do once the load balancer has seen /readyz fail.
  while (Date.now() - lastConnectionAt() < 100 && Date.now() - started < graceMs / 2) await sleep(25);
  // Stop listening without http.Server#close's closing of idle connections: one accepted a
  // moment ago may be idle only because its request has not arrived yet, and cutting it
  // would reset that request. Every response now says Connection: close instead.
  const closed = new Promise<void>((resolve) => NetServer.prototype.close.call(server, () => resolve()));
  // Streams opened during the delay end too.
  await endStreams();
  await sleep(Math.min(250, drainDelayMs));
  await untilEmpty(operations.inFlight, Math.max(0, graceMs - (Date.now() - started)));
  const cut = operations.inFlight.size;
  if (cut > 0) log.warn({ requests: cut }, 'shutdown: grace period over, closing requests still in flight');
  server.closeAllConnections();
  await closed;
  await services.shutdown('flush');
  await services.close();
  await release(running);
  log.info({ ms: Date.now() - started }, 'shutdown complete');
  // Last, so every request answered has its access line.
  await flushLog(log);
}

/** After the listener: the metrics listener, then the stores and pools (the log is flushed after). */
async function release({ services, operations, metricsServer }: Running): Promise<void> {
  operations.close();
  if (metricsServer) {
    metricsServer.closeAllConnections();
    await new Promise<void>((resolve) => metricsServer.close(() => resolve()));
  }
  await services.state.close();
}

/** Koa's `/v1/artworks/:id` as the route declares it, `/v1/artworks/{id}` (memoized: few routes). */
const declared = new Map<string, string>();
function declaredPath(koaPath: string): string {
  let path = declared.get(koaPath);
  if (path === undefined) declared.set(koaPath, (path = koaPath.replace(/:(\w+)/g, '{$1}')));
  return path;
}

/** Resolves when `inFlight` is empty, or after `ms`. */
async function untilEmpty(inFlight: InFlight, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (inFlight.size > 0 && Date.now() < deadline) await sleep(25);
}

/**
 * End every open event stream with a `retry:` hint, so its client reconnects (to another instance)
 * soon. Presence streams are ended the same way by their hub (a drain hook); others (Library) here.
 */
function endEventStreams(inFlight: InFlight, retryMs: number): void {
  for (const res of inFlight) {
    const type = res.getHeader('content-type');
    if (typeof type !== 'string' || !type.startsWith('text/event-stream') || !res.headersSent || res.writableEnded) continue;
    if (res.req?.url?.startsWith('/v1/presence/')) continue; // the hub writes to the socket itself
    res.end(`retry: ${retryMs}\n\n`);
  }
}
