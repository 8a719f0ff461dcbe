/**
 * Server configuration from environment variables (names fixed in decisions.md), validated once.
 * Tests build configs directly with `loadConfig({...})` and start real servers on ephemeral ports.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { z } from 'zod';
import { issuesLine } from '../common/errors.ts';
import { ContentStoreEnv, flag, int, optionalString, optionalUrl, url } from '../common/env.ts';

const optionalRedisUrl = z.preprocess(
  (v) => (v === '' ? undefined : v),
  url.refine((u) => /^rediss?:\/\//.test(u), 'must be a redis:// or rediss:// URL').optional(),
);
const optionalPostgresUrl = z.preprocess(
  (v) => (v === '' ? undefined : v),
  z
    .string()
    .trim()
    .refine((u) => /^postgres(ql)?:\/\/./.test(u), 'must be a postgres:// or postgresql:// URL')
    .optional(),
);

const EnvSchema = z.object({
  PORT: int(8080, 0, 65535),
  HOST: z.string().default('0.0.0.0'),
  DATA_DIR: z.string().default('data'),
  STATE_DB: z.string().default('state/museum.db'),
  PUBLIC_URL: optionalUrl,
  TRUST_PROXY: flag.default(false),
  REDIS_URL: optionalRedisUrl,
  DATABASE_URL: optionalPostgresUrl,
  GUIDE_EXHIBITION_TTL_DAYS: int(180, 1, 36_500),
  METRICS_PORT: z.preprocess((v) => (v === '' || v === undefined ? undefined : Number(v)), z.number().int().min(0).max(65535).optional()),
  METRICS_TOKEN: z.preprocess((v) => (v === '' ? undefined : v), z.string().min(16, 'must be at least 16 characters').optional()),
  // METRICS_PORT has no token: it listens on loopback unless the operator names another address.
  METRICS_HOST: z.preprocess((v) => (v === '' ? undefined : v), z.string().default('127.0.0.1')),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  CHARACTERS_UPSTREAM_URL: optionalUrl,
  ...ContentStoreEnv.shape,
  LIBRARY_UPSTREAM_URL: optionalUrl,
  LIBRARY_UPSTREAM_KEY: optionalString,
  SOULS_UPSTREAM_URL: optionalUrl,
  LLM_BASE_URL: optionalUrl,
  LLM_API_KEY: optionalString,
  LLM_MODEL: optionalString,
  TTS_BASE_URL: optionalUrl,
  TTS_API_KEY: optionalString,
  TTS_ENGINE: z.preprocess((v) => (v === '' ? undefined : v), z.enum(['espeak', 'openai']).optional()),
  TTS_MODEL: z.preprocess((v) => (v === '' ? undefined : v), z.string().default('tts-1')),
  TTS_VOICE: z.preprocess((v) => (v === '' ? undefined : v), z.string().default('alloy')),
  // How long the guide's spoken answer chunks stay fetchable (then 404).
  GUIDE_AUDIO_TTL_S: int(600, 1, 86_400),
  IPFS_GATEWAY: url.default('https://ipfs.io'),
  PRESENCE_CAPACITY: int(10_000, 1, 1_000_000),
  // Above this many listeners arrived/left are coalesced (one event per PRESENCE_COALESCE_MS).
  PRESENCE_COALESCE_ABOVE: int(300, 0, 1_000_000),
  PRESENCE_COALESCE_MS: int(250, 10, 60_000),
  PRESENCE_KEEPALIVE_MS: int(25_000, 50, 3_600_000),
  // Listeners per client IP (decisions), and how long a listener's socket may stay undrained
  // (writes refused by a full buffer) before it is dropped.
  PRESENCE_MAX_PER_IP: int(100, 1, 1_000_000),
  PRESENCE_DRAIN_TIMEOUT_MS: int(30_000, 10, 3_600_000),
  // Slow clients: the time to receive a request's headers, and its whole request (headers and
  // body; responses such as event streams are not bounded by it), and open connections per socket
  // address (0 = no cap; unset behind TRUST_PROXY, where every connection comes from the proxy).
  HEADERS_TIMEOUT_MS: int(15_000, 100, 600_000),
  REQUEST_TIMEOUT_MS: int(30_000, 100, 3_600_000),
  MAX_CONNECTIONS_PER_IP: z.preprocess(
    (v) => (v === '' || v === undefined ? undefined : Number(v)),
    z.number().int().min(0).max(1_000_000).optional(),
  ),
  // Sockets the server holds in all (issue 43); unset: half the process's open-files limit, so
  // that files, the database and /healthz always have descriptors left.
  MAX_CONNECTIONS: z.preprocess(
    (v) => (v === '' || v === undefined ? undefined : Number(v)),
    z.number().int().min(1).max(10_000_000).optional(),
  ),
  // Operational overrides (tests, slow networks): one timeout for every request/response upstream
  // call instead of the defaults (characters 20 s, Library 120 s, souls 20 s), and how long a
  // Library stream may stay silent (no frame, no heartbeat) before we end it.
  UPSTREAM_TIMEOUT_MS: z.preprocess(
    (v) => (v === '' || v === undefined ? undefined : Number(v)),
    z.number().int().min(1).max(600_000).optional(),
  ),
  LIBRARY_STREAM_IDLE_MS: int(60_000, 1, 3_600_000),
  // The viewer's artwork textures are fetched from public addresses only; these `host[:port]`
  // entries (comma-separated) are allowed even when they resolve inside (a local media host).
  VIEWER_MEDIA_ALLOW_HOSTS: z.string().default(''),
});

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  stateDb: string;
  /** Base of absolute URLs we hand out (files, slot data). Defaults to http://localhost:PORT. */
  publicUrl: string;
  trustProxy: boolean;
  redisUrl?: string;
  /** PostgreSQL for what STATE_DB holds, when several machines serve. */
  databaseUrl?: string;
  /** Exhibitions nobody read or changed for this long expire. */
  exhibitionTtlMs: number;
  /** Prometheus metrics on their own listener (0: any free port), on `metricsHost` (default 127.0.0.1)… */
  metricsPort?: number;
  metricsHost: string;
  /** …or on the main port behind `Authorization: Bearer <token>`; neither: /metrics is 404. */
  metricsToken?: string;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  ipfsGateway: string;
  upstreams: {
    characters?: { url: string; timeoutMs: number };
    content?: { url: string; token?: string };
    /** `streamIdleMs`: a stream that sends nothing (not even a heartbeat) for this long is ended. */
    library?: { url: string; key?: string; timeoutMs: number; streamIdleMs: number };
    souls?: { url: string; timeoutMs: number };
    llm?: { baseUrl: string; apiKey?: string; model: string; timeoutMs: number };
    tts?:
      | { engine: 'espeak'; timeoutMs: number }
      | { engine: 'openai'; baseUrl: string; apiKey?: string; model: string; voice: string; timeoutMs: number };
  };
  presenceCapacity: number;
  presenceCoalesceAbove: number;
  presenceCoalesceMs: number;
  presenceKeepaliveMs: number;
  presenceMaxPerIp: number;
  presenceDrainTimeoutMs: number;
  /** Time to receive a request's headers / its whole request (headers and body). */
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  /** Open connections per socket address; 0 = no cap. */
  maxConnectionsPerIp: number;
  /** Sockets held in all; more are closed by node at once (http.Server#maxConnections). */
  maxConnections: number;
  guideAudioTtlMs: number;
  viewerMediaAllowHosts: string;
}

class ConfigError extends Error {}

/** Validate an environment (process.env by default) into a Config; throws ConfigError with every problem. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const problems = issuesLine(parsed.error, { max: 10 });
    throw new ConfigError(`invalid configuration: ${problems}`);
  }
  const e = parsed.data;
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir: resolve(e.DATA_DIR),
    stateDb: e.STATE_DB === ':memory:' ? e.STATE_DB : resolve(e.STATE_DB),
    publicUrl: e.PUBLIC_URL ?? `http://localhost:${e.PORT}`,
    trustProxy: e.TRUST_PROXY,
    redisUrl: e.REDIS_URL,
    databaseUrl: e.DATABASE_URL,
    exhibitionTtlMs: e.GUIDE_EXHIBITION_TTL_DAYS * 86_400_000,
    metricsPort: e.METRICS_PORT,
    metricsHost: e.METRICS_HOST,
    metricsToken: e.METRICS_TOKEN,
    logLevel: e.LOG_LEVEL,
    ipfsGateway: e.IPFS_GATEWAY,
    upstreams: upstreamsOf(e),
    presenceCapacity: e.PRESENCE_CAPACITY,
    presenceCoalesceAbove: e.PRESENCE_COALESCE_ABOVE,
    presenceCoalesceMs: e.PRESENCE_COALESCE_MS,
    presenceKeepaliveMs: e.PRESENCE_KEEPALIVE_MS,
    presenceMaxPerIp: e.PRESENCE_MAX_PER_IP,
    presenceDrainTimeoutMs: e.PRESENCE_DRAIN_TIMEOUT_MS,
    // node requires headers ≤ request timeout.
    headersTimeoutMs: Math.min(e.HEADERS_TIMEOUT_MS, e.REQUEST_TIMEOUT_MS),
    requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
    maxConnectionsPerIp: e.MAX_CONNECTIONS_PER_IP ?? (e.TRUST_PROXY ? 0 : 256),
    maxConnections: e.MAX_CONNECTIONS ?? defaultMaxConnections(),
    guideAudioTtlMs: e.GUIDE_AUDIO_TTL_S * 1000,
    viewerMediaAllowHosts: e.VIEWER_MEDIA_ALLOW_HOSTS,
  };
}

type ParsedEnv = z.output<typeof EnvSchema>;

/** The third-party upstreams the environment configures (absent ones undefined). */
function upstreamsOf(e: ParsedEnv): Config['upstreams'] {
  return {
    characters: e.CHARACTERS_UPSTREAM_URL ? { url: e.CHARACTERS_UPSTREAM_URL, timeoutMs: e.UPSTREAM_TIMEOUT_MS ?? 20_000 } : undefined,
    content: e.CONTENT_UPSTREAM_URL ? { url: e.CONTENT_UPSTREAM_URL, token: e.CONTENT_UPSTREAM_TOKEN } : undefined,
    library: e.LIBRARY_UPSTREAM_URL
      ? {
          url: e.LIBRARY_UPSTREAM_URL,
          key: e.LIBRARY_UPSTREAM_KEY,
          timeoutMs: e.UPSTREAM_TIMEOUT_MS ?? 120_000,
          streamIdleMs: e.LIBRARY_STREAM_IDLE_MS,
        }
      : undefined,
    souls: e.SOULS_UPSTREAM_URL ? { url: e.SOULS_UPSTREAM_URL, timeoutMs: e.UPSTREAM_TIMEOUT_MS ?? 20_000 } : undefined,
    llm: e.LLM_BASE_URL
      ? {
          baseUrl: e.LLM_BASE_URL,
          apiKey: e.LLM_API_KEY,
          model: e.LLM_MODEL ?? 'gpt-4o-mini',
          timeoutMs: e.UPSTREAM_TIMEOUT_MS ?? 20_000,
        }
      : undefined,
    tts: ttsOf(e),
  };
}

/** Speech: the local espeak-ng, an OpenAI-compatible service, or none. */
function ttsOf(e: ParsedEnv): Config['upstreams']['tts'] {
  const timeoutMs = e.UPSTREAM_TIMEOUT_MS ?? 20_000;
  if (e.TTS_ENGINE === 'espeak') return { engine: 'espeak', timeoutMs };
  if (!e.TTS_BASE_URL) return undefined;
  return { engine: 'openai', baseUrl: e.TTS_BASE_URL, apiKey: e.TTS_API_KEY, model: e.TTS_MODEL, voice: e.TTS_VOICE, timeoutMs };
}

/** The soft "Max open files" limit of this process (/proc/self/limits), or null where it cannot be read. */
export function openFilesLimit(limits = '/proc/self/limits'): number | null {
  try {
    const line = readFileSync(limits, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = line ? Number(line.slice('Max open files'.length).trim().split(/\s+/)[0]) : Number.NaN;
    return Number.isSafeInteger(soft) && soft > 0 ? soft : null;
  } catch {
    return null;
  }
}

/** Half the descriptor limit (the rest: files, the database, upstream calls), 1,024 where it is unknown. */
const defaultMaxConnections = (): number => {
  const limit = openFilesLimit();
  return limit === null ? 1_024 : Math.max(64, Math.floor(limit / 2));
};
