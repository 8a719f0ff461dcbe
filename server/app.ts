/**
 * The server factory: builds the Koa app and its services from a validated Config, so tests
 * start real servers on ephemeral ports. Middleware, one job each, outermost first:
 * request id + client IP → access log → CORS → error envelope → routes (auth, limits and
 * validation are attached per route by `Api`). Immutable artifacts are answered by the fast path
 * before Koa is entered.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import type { Logger } from 'pino';
import { Api } from './api.ts';
import { flushLog, serverLog } from './log.ts';
import type { Config } from './config.ts';
import { accessLog } from './middleware/access-log.ts';
import { guardConnections, refusedBeforeRouting, serverOptions } from './middleware/connections.ts';
import { cors } from './middleware/cors.ts';
import { fileResponseHeaders } from './middleware/file-headers.ts';
import { clientErrorResponder, errorEnvelope } from './middleware/errors.ts';
import type { RateLimitStore } from './middleware/rate-limit.ts';
import { requestContext } from './middleware/request-id.ts';
import { ROUTE_MODULES } from './routes/index.ts';
import { buildServices } from './services.ts';
import type { MuseumState, Services } from './types.ts';

export interface MuseumServer {
  url: string;
  port: number;
  server: Server;
  app: Koa<MuseumState>;
  services: Services;
  close(): Promise<void>;
}

export interface ServerOptions {
  log?: Logger;
  limiter?: RateLimitStore;
}

export async function startServer(config: Config, options: ServerOptions = {}): Promise<MuseumServer> {
  const log = options.log ?? serverLog(config.logLevel);
  const services = await buildServices(config, log, { limiter: options.limiter });
  const { keys, limiter } = services;

  const api = new Api({ keys, limiter, log });
  for (const register of ROUTE_MODULES) register(api, services);
  const fastPath = api.fastPath();

  const app = new Koa<MuseumState>();
  app.silent = true;
  app.on('error', (err: NodeJS.ErrnoException) => {
    // Clients that hang up mid-stream are normal (SSE, aborted downloads).
    if (err.code === 'ERR_STREAM_PREMATURE_CLOSE' || err.code === 'ECONNRESET' || err.code === 'EPIPE') return;
    log.error({ err }, 'koa error');
  });
  app.use(requestContext({ trustProxy: config.trustProxy }));
  app.use(accessLog(log));
  app.use(fileResponseHeaders());
  app.use(cors());
  app.use(errorEnvelope(log));
  app.use(api.router.routes());
  app.use(api.router.allowedMethods());

  const koaHandler = app.callback();
  const server = createServer(serverOptions(config), (req, res) => {
    if (refusedBeforeRouting(req, res)) return;
    if (!fastPath(req, res)) void koaHandler(req, res);
  });
  server.on('clientError', clientErrorResponder());
  server.keepAliveTimeout = 65_000;
  // Bounded time to receive a request (not its response: streams run for minutes), connections per IP.
  guardConnections(server, config, log);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;

  let closing: Promise<void> | null = null;
  return {
    url: `http://${host}:${port}`,
    port,
    server,
    app,
    services,
    /**
     * The shutdown sequence (`museum serve` runs it on SIGTERM and SIGINT): the services' cleanups,
     * last registered first; the connections and the listener; the state store; then the access log
     * is flushed, last, so every request answered has its line.
     */
    close() {
      closing ??= (async () => {
        await services.close();
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        await services.state.close();
        await flushLog(log);
      })();
      return closing;
    },
  };
}
