/**
 * The rate-limit store shared by every instance (REDIS_URL): one exact sliding window per subject in
 * Redis, so a key gets 120 requests per minute from the whole deployment, not from each instance.
 * While Redis cannot answer, every instance limits on its own (the in-memory store) rather than
 * refusing or hanging requests, and says so once in the log.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { RedisOrLocal } from '../state/redis.ts';
import type { RateDecision, RateLimitStore } from './rate-limit.ts';

// The window of a subject is a sorted set of its hit times. Atomic per subject: drop the hits that
// left the window, count, record this one only when allowed, and let an idle subject expire.
// Returns {allowed 0|1, remaining}.
const HIT_SCRIPT = `
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count >= limit then
  return {0, 0}
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], window)
return {1, limit - count - 1}
`;

type HitCommand = (key: string, now: number, windowMs: number, limit: number, member: string) => Promise<[number, number]>;

export class RedisRateLimitStore implements RateLimitStore {
  private readonly instance = randomBytes(6).toString('hex');
  private sequence = 0;
  private readonly hitScript: HitCommand;
  private readonly shared: RedisOrLocal;

  constructor(
    redis: Redis,
    private readonly fallback: RateLimitStore,
    log: Logger,
    private readonly prefix = 'museum:rate:',
  ) {
    redis.defineCommand('museumRateHit', { numberOfKeys: 1, lua: HIT_SCRIPT });
    this.hitScript = (redis as unknown as { museumRateHit: HitCommand }).museumRateHit.bind(redis);
    this.shared = new RedisOrLocal(log, {
      down: 'Redis does not answer: rate limits are per instance until it does',
      back: 'rate limits are shared through Redis again',
    });
  }

  hit(subject: string, limit: number, windowMs: number, now: number): Promise<RateDecision> {
    return this.shared.run(
      async () => {
        // Hits made in the same millisecond by different instances stay distinct members.
        const member = `${now}:${this.instance}:${this.sequence++}`;
        const [allowed, remaining] = await this.hitScript(this.prefix + subject, now, windowMs, limit, member);
        return { allowed: allowed === 1, remaining };
      },
      () => this.fallback.hit(subject, limit, windowMs, now),
    );
  }
}
