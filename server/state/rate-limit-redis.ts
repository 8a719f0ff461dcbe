/**
 * The rate-limit store shared by every instance (REDIS_URL): one exact sliding window per subject in
 * Redis, so a key gets 120 requests per minute from the whole deployment, not from each instance.
 * Hits go to Redis in batches, as one script call each, one batch in flight at a time (group commit):
 * the hits that arrive while a batch is out leave together when it returns, so under load one write
 * and one reply serve many requests instead of one round trip each — what makes a shared limit
 * affordable (bench/serve.ts, "artworks (Redis)") — and a lone request waits for nobody (it leaves
 * at the end of its event-loop turn). While Redis cannot answer, every
 * instance limits on its own (the in-memory store) rather than refusing or hanging requests, and
 * says so once in the log.
 *
 * Fallback semantics: after a failed batch, hits are decided locally at once while one batch at a
 * time probes Redis, and none does for a short window after a command timeout (RedisOrLocal,
 * FAIL_FAST_MS), so a stalled Redis costs one batch a timeout per window. Hits decided locally are
 * not counted in Redis, and the local windows start empty: during an outage a key can exceed its
 * limit by the local allowance of each instance (up to `limit` more per instance per window). Hits
 * beyond MAX_PENDING waiting for Redis are decided locally too: a slow Redis cannot grow the queue.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { RedisOrLocal } from './redis.ts';
import type { RateDecision, RateLimitStore } from '../middleware/rate-limit.ts';

// The window of a subject is a sorted set of its hit times. Atomic for the whole batch, hit by hit in
// order (a subject hit twice in one batch counts twice): drop the hits that left the window, count,
// record this one only when allowed, and let an idle subject expire. ARGV holds four values per hit
// (now, window, limit, member); returns, per hit, two values: the remaining budget, or -1 when
// refused, and the time of the oldest hit in the window.
const HIT_SCRIPT = `
local out = {}
for i, key in ipairs(KEYS) do
  local now = tonumber(ARGV[i * 4 - 3])
  local window = tonumber(ARGV[i * 4 - 2])
  local limit = tonumber(ARGV[i * 4 - 1])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local count = redis.call('ZCARD', key)
  if count >= limit then
    out[i * 2 - 1] = -1
  else
    redis.call('ZADD', key, now, ARGV[i * 4])
    redis.call('PEXPIRE', key, window)
    out[i * 2 - 1] = limit - count - 1
  end
  out[i * 2] = tonumber(redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2])
end
return out
`;

/** Hits sent in one script call at most (more wait for the next): bounds the time Redis spends on one call. */
const MAX_BATCH = 512;
/** Hits waiting for Redis at most (a few batches); more are decided locally at once. */
export const MAX_PENDING = 4 * MAX_BATCH;

type HitCommand = (keyCount: number, ...keysThenArgs: Array<string | number>) => Promise<number[]>;

interface PendingHit {
  subject: string;
  limit: number;
  windowMs: number;
  now: number;
  resolve: (decision: RateDecision) => void;
  reject: (err: unknown) => void;
}

export class RedisRateLimitStore implements RateLimitStore {
  private readonly instance = randomBytes(6).toString('hex');
  private sequence = 0;
  private readonly hitScript: HitCommand;
  private readonly shared: RedisOrLocal;
  private pending: PendingHit[] = [];
  /** A batch is out, or about to leave at the end of this turn: new hits join the next one. */
  private busy = false;

  constructor(
    redis: Redis,
    private readonly fallback: RateLimitStore,
    log: Logger,
    private readonly prefix = 'museum:rate:',
  ) {
    redis.defineCommand('museumRateHits', { lua: HIT_SCRIPT });
    this.hitScript = (redis as unknown as { museumRateHits: HitCommand }).museumRateHits.bind(redis);
    this.shared = new RedisOrLocal(log, {
      down: 'Redis does not answer: rate limits are per instance until it does',
      back: 'rate limits are shared through Redis again',
    });
  }

  hit(subject: string, limit: number, windowMs: number, now: number): Promise<RateDecision> {
    // Redis failed moments ago, a probe is out, or the queue is full: no waiting on Redis.
    if (!this.shared.tryRedis || this.pending.length >= MAX_PENDING) return this.fallback.hit(subject, limit, windowMs, now);
    return new Promise((resolve, reject) => {
      this.pending.push({ subject, limit, windowMs, now, resolve, reject });
      if (!this.busy) {
        this.busy = true;
        setImmediate(this.send);
      }
    });
  }

  /** Send the waiting hits (at most MAX_BATCH) and, once answered, the ones that came meanwhile. */
  private readonly send = (): void => {
    const batch = this.pending.splice(0, MAX_BATCH);
    this.sendBatch(batch)
      .catch((err: unknown) => batch.forEach((hit) => hit.reject(err)))
      .finally(() => {
        if (this.pending.length > 0) this.send();
        else this.busy = false;
      });
  };

  private async sendBatch(batch: PendingHit[]): Promise<void> {
    const decisions = await this.shared.run<RateDecision[]>(
      () => this.viaRedis(batch),
      () => Promise.all(batch.map((hit) => this.fallback.hit(hit.subject, hit.limit, hit.windowMs, hit.now))),
    );
    batch.forEach((hit, i) => hit.resolve(decisions[i]!));
  }

  /** One script call for the batch (built only when Redis is tried: not during a fail-fast window). */
  private async viaRedis(batch: PendingHit[]): Promise<RateDecision[]> {
    const keys: string[] = [];
    const args: Array<string | number> = [];
    for (const hit of batch) {
      keys.push(this.prefix + hit.subject);
      // Hits made in the same millisecond by different instances stay distinct members.
      args.push(hit.now, hit.windowMs, hit.limit, `${hit.now}:${this.instance}:${this.sequence++}`);
    }
    const reply = await this.hitScript(keys.length, ...keys, ...args);
    if (!Array.isArray(reply) || reply.length !== 2 * batch.length || !reply.every(Number.isInteger))
      throw new Error('unexpected reply to the rate-limit script');
    return batch.map((hit, i) => {
      const [remaining, oldest] = [reply[2 * i]!, reply[2 * i + 1]!];
      return { allowed: remaining >= 0, remaining: Math.max(0, remaining), resetMs: oldest + hit.windowMs - hit.now };
    });
  }
}
