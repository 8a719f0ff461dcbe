/**
 * The server factory: builds the server and its services from a validated Config, so tests start
 * real servers on ephemeral ports. The node server's request listener is the Koa app's callback
 * (server/koa-app.ts: its middleware in one order, down to the route table's declarations in
 * server/route-table.ts: `/v1`, `/files`, the pages, `/healthz` `/readyz` `/metrics`).
 *
 * Two ways to stop: `close()` at once (tests), and `shutdown()` — the one graceful sequence
 * (SIGTERM): readiness fails and every response says `Connection: close`, event streams end with a
 * `retry:` hint (clients reconnect to another instance), the listener closes after a short delay
 * (load balancers see /readyz fail first) once new connections pause, requests in flight are
 * answered (bounded), then the `onShutdown('flush')` hooks run and the services and pools close;
 * the log is flushed last.
 */
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import { flushLog, serverLog } from './log.ts';
import { guardConnections, refusedBeforeRouting, serverOptions } from './sockets/connections.ts';
import { museumApp } from './koa-app.ts';
import { clientErrorResponder } from './middleware/errors.ts';
import type { RateLimitStore } from './middleware/rate-limit.ts';
import { Operations, operationRoutes } from './operations.ts';
import { RouteTable } from './route-table.ts';
import { ROUTE_MODULES } from './routes/index.ts';
import { type BuiltServices, buildServices } from './services.ts';
import type { MuseumContext, Services } from './types.ts';

export interface MuseumServer {
  url: string;
  port: number;
  server: Server;
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

/**
 * Defaults of the graceful shutdown: how long readiness fails before the listener closes, how long
 * requests in flight get, the streams' reconnect hint.
 */
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
  const { keys, limiter, content, state, redis, presence } = services;
  const operations = new Operations({ content, state, redis, presence });
  const table = new RouteTable({ keys, limiter });
  for (const register of ROUTE_MODULES) register(table, services);
  operationRoutes(table, operations, config.metricsPort === undefined ? config.metricsToken : undefined);

  const koa = museumApp({ table, log, trustProxy: config.trustProxy, operations }).callback();
  // Only what must be refused before Koa sees a request (over the per-IP cap, no Host) comes first.
  const handler: RequestListener = (req, res) => {
    if (!refusedBeforeRouting(req, res)) void koa(req, res);
  };
  const { server, lastConnectionAt } = nodeServer(config, operations, handler, log);
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

/** The node server, not yet listening, with its guards. `lastConnectionAt` is when the last connection arrived while draining. */
function nodeServer(
  config: Config,
  operations: Operations,
  handler: RequestListener,
  log: Logger,
): { server: Server; lastConnectionAt: () => number } {
  const server = createServer(serverOptions(config), handler);
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
  // Stop listening (public http.Server#close, which also closes the connections idle right now;
  // busy ones answer with Connection: close and end after their response).
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
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

/** Resolves when no request is in flight, or after `ms`. */
async function untilEmpty(inFlight: ReadonlySet<MuseumContext>, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (inFlight.size > 0 && Date.now() < deadline) await sleep(25);
}

/**
 * End every open event stream with a `retry:` hint, so its client reconnects (to another instance)
 * soon. Streams are known from their route's declaration; a route that ends its own (the presence
 * hub, a drain hook) is left to it.
 */
function endEventStreams(inFlight: ReadonlySet<MuseumContext>, retryMs: number): void {
  for (const ctx of [...inFlight]) {
    const response = ctx.state.route?.response;
    if (!response || !('sse' in response) || response.endsOwnStreams) continue;
    if (!ctx.res.headersSent || ctx.res.writableEnded) continue;
    ctx.res.end(`retry: ${retryMs}\n\n`);
  }
}
