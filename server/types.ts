/**
 * Types shared by the server's modules (the app, the route table, the stages, the routes), kept
 * apart so that none of them has to import another just for its types.
 */
import type { Readable } from 'node:stream';
import type { Middleware, ParameterizedContext } from 'koa';
import type { CompressOptions } from 'koa-compress';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { ArtifactFiles } from './artifact-files.ts';
import type { Config } from './config.ts';
import type { ContentStore } from './content.ts';
import type { Guide } from './guide/guide.ts';
import type { SpeechClips } from './guide/speech.ts';
import type { StarterJobs } from './guide/suggestions.ts';
import type { ImageVariants } from './image-variants.ts';
import type { RateLimitStore } from './middleware/rate-limit.ts';
import type { PresenceHub } from './presence/hub.ts';
import type { AnyRouteDef, PathMatch } from './route-table.ts';
import type { KeyStore } from './state/keys.ts';
import type { ExhibitionStore } from './state/exhibitions.ts';
import type { StateStore } from './state/store.ts';
import type { CharactersClient } from './upstream/characters.ts';
import type { LibraryClient } from './upstream/library.ts';
import type { SoulsClient } from './upstream/souls.ts';
import type { ViewerAssets } from './view/assets.ts';
import type { ArtworkTextures } from './view/textures.ts';

/** What the middleware learns about a request, in `ctx.state`. */
export interface MuseumState {
  /** Set first, by the request-context middleware. */
  requestId: string;
  clientIp: string;
  /** When the request arrived (performance.now()). */
  started: number;
  /** The presented key's id, on keyed routes once it is authenticated. */
  keyId?: number;
  /** The JSON body as parsed, before the route's schema validates it (json-body middleware). */
  body?: unknown;
  /** The declarations of the request's path (route match stage); null: no route has this path. */
  match?: PathMatch | null;
  /** The declaration answering the request (dispatch stage): metrics, the access line and the shutdown read it. */
  route?: AnyRouteDef;
}

/** What the museum's middleware add to Koa's context: @koa/router's path parameters, koa-compress's per-response switch. */
export interface MuseumContextExtras {
  params: Record<string, string>;
  compress?: boolean | CompressOptions;
}
/** A request's Koa context: its state, and the path parameters @koa/router decoded (empty before routing). */
export type MuseumContext = ParameterizedContext<MuseumState> & MuseumContextExtras;
/** A Koa middleware of the museum's app (server/koa-app.ts lists them in order). */
export type MuseumMiddleware = Middleware<MuseumState, MuseumContextExtras>;
/** A route's own step (auth, limit, body): it throws to refuse, else the route's next step runs. */
export type RouteStage = (ctx: MuseumContext) => void | Promise<void>;
/** What a route handler gets: the Koa context; its path parameters as sent (percent-decoded), before validation. */
export type RouteContext = MuseumContext;

/** Response headers as one object; precomputed sets are shared, never mutated. */
export type Headers = Readonly<Record<string, string>>;

/** A whole response: status, headers (besides request id, CORS, rate limits), body. */
export interface PreparedResponse {
  status: number;
  headers: Headers;
  /** null: no body (304, HEAD). */
  body: Buffer | Readable | null;
}

/** The guide's collaborators. */
export interface GuideServices {
  exhibitions: ExhibitionStore;
  guide: Guide;
  starters: StarterJobs;
  speech: SpeechClips | null;
}

/** What the 3D viewer's pages serve besides the artifacts. */
export interface ViewServices {
  /** The viewer's and the API reference's scripts and styles (built once, content-hashed names). */
  assets: ViewerAssets;
  /** Same-origin WebP textures of artwork images. */
  textures: ArtworkTextures;
}

/** Everything the routes use, built once per server by the composition root (services.ts). */
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
  files: ArtifactFiles;
  variants: ImageVariants;
  /** Live upstreams; null when not configured (their routes answer 503 UNCONFIGURED). */
  characters: CharactersClient | null;
  library: LibraryClient | null;
  souls: SoulsClient | null;
  guide: GuideServices;
  presence: PresenceHub;
  view: ViewServices;
  /** Register cleanup to run when the server closes (timers, upstream sockets, listeners). */
  onClose(fn: () => void | Promise<void>): void;
  /**
   * Hook into the graceful shutdown (SIGTERM): `drain` runs first (end long-lived streams with a
   * `retry:` hint), `flush` once requests in flight are answered, before the `onClose` cleanups
   * (e.g. write out a buffered access log).
   */
  onShutdown(phase: ShutdownPhase, fn: () => void | Promise<void>): void;
}

export type ShutdownPhase = 'drain' | 'flush';
