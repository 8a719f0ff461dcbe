/**
 * The one Redis connection of a server (REDIS_URL), shared by what several instances must agree on:
 * rate limits, presence, guide sessions and speech clips. Each of those keeps working alone on its
 * instance while Redis does not answer.
 */
import { Redis } from 'ioredis';
import type { Logger } from 'pino';

/**
 * A Redis client for request-path work: commands fail fast (no offline queue, one retry, a short
 * timeout) so a Redis outage costs a request ~0.25 s at most, while the client reconnects in the
 * background. Resolves once connected, or after `waitMs` with the client still trying.
 */
export async function connectRedis(url: string, log: Logger, waitMs = 1_000): Promise<Redis> {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: 250,
    // Off: the one command per request (the rate limit) is batched by its store, one batch in
    // flight at a time; ioredis's own per-tick pipelining cost ~10 µs of CPU per command on top.
    enableAutoPipelining: false,
    connectTimeout: 1_000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2_000),
  });
  let reported = false;
  redis.on('error', (err: Error) => {
    if (reported) return;
    reported = true;
    log.warn({ err: err.message }, 'Redis connection failed; retrying in the background');
  });
  redis.on('ready', () => {
    reported = false;
  });
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, waitMs);
    redis.once('ready', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  return redis;
}

/**
 * Work that goes to Redis while it answers and to a local fallback while it does not, saying so
 * once per outage (and once when Redis is back) instead of once per request.
 */
export class RedisOrLocal {
  private degraded = false;

  constructor(
    private readonly log: Logger,
    private readonly messages: { down: string; back: string },
  ) {}

  async run<T>(viaRedis: () => Promise<T>, viaFallback: () => T | Promise<T>): Promise<T> {
    try {
      const result = await viaRedis();
      if (this.degraded) {
        this.degraded = false;
        this.log.info(this.messages.back);
      }
      return result;
    } catch (err) {
      if (!this.degraded) {
        this.degraded = true;
        this.log.warn({ err: (err as Error).message }, this.messages.down);
      }
      return viaFallback();
    }
  }
}
