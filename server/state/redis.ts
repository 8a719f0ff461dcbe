/**
 * The one Redis connection of a server (REDIS_URL), shared by what several instances must agree on:
 * rate limits, presence, guide sessions and speech clips. Each of those keeps working alone on its
 * instance while Redis does not answer.
 */
import { Redis } from 'ioredis';
import type { Logger } from 'pino';

/**
 * A Redis client for request-path work: commands fail fast (no offline queue, one retry, a short
 * timeout) so a Redis outage costs a request ~0.25 s at most (RedisOrLocal spares most requests even
 * that), while the client reconnects in the background. Resolves once connected, or after `waitMs`
 * with the client still trying.
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

/** After a command timeout, calls skip Redis for this long instead of each waiting out another. */
const FAIL_FAST_MS = 500;

/**
 * Whether a failure cost a command timeout (Redis stalled: stopped, partitioned, busy with a long
 * command). Other failures come back at once — the connection is down (no offline queue: rejected
 * on the spot) or Redis answered with an error — so they need no window, and calls reach Redis again
 * as soon as it reconnects.
 */
const isStall = (err: unknown): boolean => err instanceof Error && err.message === 'Command timed out'; // ioredis's commandTimeout

/**
 * Work that goes to Redis while it answers and to a local fallback while it does not, saying so
 * once per outage (and once when Redis is back) instead of once per request. While degraded, one
 * call at a time tries Redis (the probe; the others go local) until one succeeds, and after a
 * command timeout none does for FAIL_FAST_MS: a stall costs one call a timeout per window, not every
 * call one each. Each user (rate limits, guide sessions, seats) holds its own instance and notices
 * an outage by itself.
 */
export class RedisOrLocal {
  private degraded = false;
  private failedAt = 0;
  private probing = false;

  constructor(
    private readonly log: Logger,
    private readonly messages: { down: string; back: string },
  ) {}

  /** Whether a call now would try Redis: yes while healthy; while degraded, only as the next probe. */
  get tryRedis(): boolean {
    return !this.degraded || (!this.probing && Date.now() - this.failedAt >= FAIL_FAST_MS);
  }

  run<T>(viaRedis: () => Promise<T>, viaFallback: () => T | Promise<T>): Promise<T> {
    // Healthy: one async call, as before the fail-fast window existed.
    return this.degraded ? this.runDegraded(viaRedis, viaFallback) : this.attempt(viaRedis, viaFallback);
  }

  private async runDegraded<T>(viaRedis: () => Promise<T>, viaFallback: () => T | Promise<T>): Promise<T> {
    if (!this.tryRedis) return viaFallback();
    this.probing = true;
    try {
      return await this.attempt(viaRedis, viaFallback);
    } finally {
      this.probing = false;
    }
  }

  private async attempt<T>(viaRedis: () => Promise<T>, viaFallback: () => T | Promise<T>): Promise<T> {
    try {
      const result = await viaRedis();
      if (this.degraded) {
        this.degraded = false;
        this.log.info(this.messages.back);
      }
      return result;
    } catch (err) {
      if (isStall(err)) this.failedAt = Date.now();
      if (!this.degraded) {
        this.degraded = true;
        this.log.warn({ err: (err as Error).message }, this.messages.down);
      }
      return viaFallback();
    }
  }
}
