/**
 * The composition root: every service the routes use is built here, once per server, from the
 * validated Config — state stores, the content snapshot, artifact files and image variants, upstream
 * clients, the guide's collaborators, the presence hub, the viewer's assets and artwork textures —
 * and torn down in reverse order by `close`.
 * Route modules receive them ready-made; none builds or memoizes a client of its own.
 */
import { join } from 'node:path';
import type { Logger } from 'pino';
import { artifactPaths } from '../artifacts/format.ts';
import { parseAllowHosts } from '../common/net.ts';
import { ArtifactFiles } from './artifact-files.ts';
import type { Config } from './config.ts';
import { ContentStore } from './content.ts';
import { Guide } from './guide/guide.ts';
import { MemorySessionStore, RedisSessionStore } from './guide/sessions.ts';
import { RedisClipRegistry, SpeechClips } from './guide/speech.ts';
import { StarterJobs } from './guide/suggestions.ts';
import { ImageVariants } from './image-variants.ts';
import { MemoryRateLimitStore, type RateLimitStore } from './middleware/rate-limit.ts';
import { RedisRateLimitStore } from './state/rate-limit-redis.ts';
import { InProcessBroadcaster } from './presence/broadcaster.ts';
import { PresenceHub } from './presence/hub.ts';
import { RedisBroadcaster } from './presence/redis-broadcaster.ts';
import { connectRedis } from './state/redis.ts';
import { openStateStore } from './state/store.ts';
import type { GuideServices, Services, ShutdownPhase, ViewServices } from './types.ts';
import { CharactersClient } from './upstream/characters.ts';
import { LibraryClient } from './upstream/library.ts';
import { LlmClient } from './upstream/llm.ts';
import { SoulsClient } from './upstream/souls.ts';
import { commandAvailable, EspeakSpeech, OpenAiSpeech, type SpeechEngine } from './upstream/tts.ts';
import { ViewerAssets } from './view/assets.ts';
import { ArtworkTextures } from './view/textures.ts';

export interface ServiceOptions {
  /** A rate-limit store to use instead of the configured one (tests). */
  limiter?: RateLimitStore;
}

export interface BuiltServices extends Services {
  /** Run the registered cleanups, last registered first (the state store is closed by the caller, last). */
  close(): Promise<void>;
  /** Run the hooks of one phase of the graceful shutdown (app.ts), in registration order. */
  shutdown(phase: ShutdownPhase): Promise<void>;
}

export async function buildServices(config: Config, log: Logger, options: ServiceOptions = {}): Promise<BuiltServices> {
  const closers: Array<() => void | Promise<void>> = [];
  const onClose = (fn: () => void | Promise<void>) => void closers.push(fn);
  const hooks: Record<ShutdownPhase, Array<() => void | Promise<void>>> = { drain: [], flush: [] };
  const onShutdown = (phase: ShutdownPhase, fn: () => void | Promise<void>) => void hooks[phase].push(fn);

  const state = await openStateStore(config, log, { serving: true });
  const { keys } = state;
  let content: ContentStore | undefined;
  let redis: Awaited<ReturnType<typeof connectRedis>> | null;
  try {
    content = await ContentStore.open(config.dataDir, config.publicUrl, log);
    content.watch();
    // Several instances share rate limits, presence and guide state through Redis.
    redis = config.redisUrl ? await connectRedis(config.redisUrl, log) : null;
  } catch (err) {
    // Nothing half-built stays open (the state store's pool, the data directory's watcher).
    content?.close();
    await state.close();
    throw err;
  }
  if (redis) onClose(() => redis.disconnect());
  const limiter = options.limiter ?? (redis ? new RedisRateLimitStore(redis, new MemoryRateLimitStore(), log) : new MemoryRateLimitStore());

  const files = new ArtifactFiles(artifactPaths(config.dataDir).files);
  const variants = new ImageVariants(config.dataDir, files, log);

  const { characters, library, souls } = upstreamClients(config, log);

  const services: Services = {
    config,
    log,
    state,
    keys,
    limiter,
    redis,
    content,
    files,
    variants,
    characters,
    library,
    souls,
    guide: guideServices(config, log, { state, redis, library, characters, onClose }),
    presence: presenceHub(config, log, redis, onClose),
    view: viewServices(config, log),
    onClose,
    onShutdown,
  };
  // A graceful shutdown ends the presence streams first (with a retry hint): they do not hold it up.
  onShutdown('drain', () => services.presence.close());
  return {
    ...services,
    async close() {
      for (const fn of closers.reverse()) await fn();
      content.close();
    },
    async shutdown(phase) {
      for (const fn of hooks[phase]) await fn();
    },
  };
}

/** The clients of the configured third-party upstreams (null where one is not configured). */
function upstreamClients(config: Config, log: Logger) {
  const { characters, library, souls } = config.upstreams;
  return {
    characters: characters ? new CharactersClient({ url: characters.url, timeoutMs: characters.timeoutMs, log }) : null,
    library: library
      ? new LibraryClient({ url: library.url, key: library.key, timeoutMs: library.timeoutMs, streamIdleMs: library.streamIdleMs, log })
      : null,
    souls: souls ? new SoulsClient({ url: souls.url, timeoutMs: souls.timeoutMs, log }) : null,
  };
}

function guideServices(
  config: Config,
  log: Logger,
  deps: Pick<Services, 'state' | 'redis' | 'library' | 'characters' | 'onClose'>,
): GuideServices {
  const { state, redis, library, characters, onClose } = deps;
  const exhibitions = state.exhibitions;
  // With REDIS_URL a follow-up prepared on one instance can be fetched from any other.
  const sessions = redis ? new RedisSessionStore(redis, new MemorySessionStore(), log) : new MemorySessionStore();
  const llm = config.upstreams.llm ? new LlmClient({ ...config.upstreams.llm, log }) : null;
  const engine = speechEngine(config, log);
  const shared = redis ? new RedisClipRegistry(redis) : undefined;
  const speech = engine ? new SpeechClips({ engine, publicUrl: config.publicUrl, ttlMs: config.guideAudioTtlMs, shared }) : null;
  const guide = new Guide({ store: exhibitions, sessions, llm, library, characters, speech, log });
  const starters = new StarterJobs({ store: exhibitions, llm, log });
  onClose(async () => {
    await starters.close();
    await guide.close();
    await sessions.close();
  });
  return { exhibitions, guide, starters, speech };
}

function viewServices(config: Config, log: Logger): ViewServices {
  const textures = new ArtworkTextures({
    cacheDir: join(artifactPaths(config.dataDir).cache, 'textures'),
    policy: { allowHosts: parseAllowHosts(config.viewerMediaAllowHosts), trustedOrigins: [] },
    log,
  });
  return { assets: new ViewerAssets(), textures };
}

function speechEngine(config: Config, log: Logger): SpeechEngine | null {
  const tts = config.upstreams.tts;
  if (!tts) return null;
  if (tts.engine === 'espeak') {
    const missing = ['espeak-ng', 'lame'].filter((c) => !commandAvailable(c));
    if (missing.length) {
      log.error(`TTS_ENGINE=espeak but ${missing.join(' and ')} is not installed (Debian packages espeak-ng, lame); guide speech is off`);
      return null;
    }
    return new EspeakSpeech({ timeoutMs: tts.timeoutMs, log });
  }
  return new OpenAiSpeech({ baseUrl: tts.baseUrl, apiKey: tts.apiKey, model: tts.model, voice: tts.voice, timeoutMs: tts.timeoutMs, log });
}

function presenceHub(config: Config, log: Logger, redis: Services['redis'], onClose: Services['onClose']): PresenceHub {
  // Subscribing takes a connection of its own; it queues its commands until connected.
  const broadcaster = redis
    ? new RedisBroadcaster(redis, redis.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: null, commandTimeout: undefined }), log)
    : new InProcessBroadcaster();
  const hub = new PresenceHub({
    broadcaster,
    capacity: config.presenceCapacity,
    coalesceAbove: config.presenceCoalesceAbove,
    coalesceMs: config.presenceCoalesceMs,
    keepaliveMs: config.presenceKeepaliveMs,
    maxPerIp: config.presenceMaxPerIp,
    drainTimeoutMs: config.presenceDrainTimeoutMs,
  });
  onClose(() => {
    hub.close();
    return broadcaster.close();
  });
  return hub;
}
