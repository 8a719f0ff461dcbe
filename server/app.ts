/**
 * The server factory: builds the Koa app and its services from a validated Config, so tests
 * start real servers on ephemeral ports. Middleware, one job each, outermost first:
 * request id + client IP → access log → CORS → error envelope → routes (auth, limits and
 * validation are attached per route by `Api`). Immutable artifacts are answered by the fast path
 * before Koa is entered.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import Koa from 'koa';
import pino, { type Logger } from 'pino';
import { Api } from './api.ts';
import type { Config } from './config.ts';
import { ContentStore } from './content.ts';
import { accessLog } from './middleware/access-log.ts';
import { guardConnections, refuseWithoutHost, serverOptions } from './middleware/connections.ts';
import { cors } from './middleware/cors.ts';
import { fileResponseHeaders } from './middleware/file-headers.ts';
import { clientErrorResponder, errorEnvelope } from './middleware/errors.ts';
import { MemoryRateLimitStore, type RateLimitStore } from './middleware/rate-limit.ts';
import { RedisRateLimitStore } from './middleware/rate-limit-redis.ts';
import { requestContext } from './middleware/request-id.ts';
import { ROUTE_MODULES } from './routes/index.ts';
import type { KeyStore } from './state/keys.ts';
import { connectRedis } from './state/redis.ts';
import { openStateStore, type StateStore } from './state/store.ts';

export interface Services {
  config: Config;
  log: Logger;
  /** Keys and exhibitions: SQLite (STATE_DB) or PostgreSQL (DATABASE_URL). */
  state: StateStore;
  keys: KeyStore;
  limiter: RateLimitStore;
  /** The shared Redis connection when REDIS_URL is set (rate limits, presence, guide sessions and clips). */
  redis: Redis | null;
  content: ContentStore;
  /** Register cleanup to run when the server closes (timers, upstream sockets, listeners). */
  onClose(fn: () => void | Promise<void>): void;
  /**
   * Register a raw node:http handler tried before Koa (the fast path for immutable artifacts);
   * it returns true when it answered the request.
   */
  addFastPath(handler: FastPathHandler): void;
}

export type FastPathHandler = (req: IncomingMessage, res: ServerResponse) => boolean;

/** A route group: registers its routes (and any services it owns) on the API. */
export type RouteModule = (api: Api, services: Services) => void;

export interface MuseumServer {
  url: string;
  port: number;
  server: Server;
  app: Koa;
  services: Services;
  close(): Promise<void>;
}

export interface ServerOptions {
  log?: Logger;
  limiter?: RateLimitStore;
}

export async function startServer(config: Config, options: ServerOptions = {}): Promise<MuseumServer> {
  const log = options.log ?? pino({ level: config.logLevel, base: undefined }, pino.destination(2));
  const closers: Array<() => void | Promise<void>> = [];
  const fastPaths: FastPathHandler[] = [];
  const state = await openStateStore(config, log, { serving: true });
  const keys = state.keys;
  const content = await ContentStore.open(config.dataDir, config.publicUrl, log);
  content.watch();
  // Several instances share rate limits, presence and guide state through Redis.
  const redis = config.redisUrl ? await connectRedis(config.redisUrl, log) : null;
  if (redis) closers.push(() => redis.disconnect());
  const limiter = options.limiter ?? (redis ? new RedisRateLimitStore(redis, new MemoryRateLimitStore(), log) : new MemoryRateLimitStore());
  const services: Services = {
    config,
    log,
    state,
    keys,
    limiter,
    redis,
    content,
    onClose: (fn) => closers.push(fn),
    addFastPath: (handler) => fastPaths.push(handler),
  };

  const api = new Api({ keys, limiter: services.limiter });
  for (const register of ROUTE_MODULES) register(api, services);

  const app = new Koa();
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
    if (refuseWithoutHost(req, res)) return;
    for (const fast of fastPaths) if (fast(req, res)) return;
    void koaHandler(req, res);
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
    close() {
      closing ??= (async () => {
        for (const fn of closers.reverse()) await fn();
        content.close();
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        await state.close();
      })();
      return closing;
    },
  };
}
