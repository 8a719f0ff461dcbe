/**
 * Sliding-window rate limiting (decisions: 120 per 60 s per key; per-IP budgets for public write
 * routes). The window is exact — a log of hit times per subject — behind a small store interface
 * so a Redis store can share one budget across instances.
 */
import { LRUCache } from 'lru-cache';
import { clientBucket } from '../../common/net.ts';
import { HttpError } from '../errors.ts';
import type { RouteStage } from '../types.ts';

export interface RateDecision {
  allowed: boolean;
  remaining: number;
  /** Milliseconds until the oldest hit counted in the window leaves it (a place frees up). */
  resetMs: number;
}

export interface RateLimitStore {
  /** Record a hit for `subject` if the window has room; say whether it was allowed. */
  hit(subject: string, limit: number, windowMs: number, now: number): Promise<RateDecision>;
}

/**
 * In-process store: per subject, its hits inside the window, oldest first, in a ring of `limit`
 * times. A hit first drops the hits that left the window from the front, then is allowed when
 * fewer than `limit` remain: O(1) amortized, however close a key runs to its budget. (Were the
 * clock to step back, a newer time could sit behind an older one; it then leaves the window no
 * sooner than that older one — the store errs toward refusing, never allows more than `limit`.)
 * Bounded: at most `maxSubjects` subjects, least recently used evicted first (an evicted subject
 * can only have been idle, so it loses nothing that matters unless the table is flooded — which is
 * what the bound is for).
 */
export class MemoryRateLimitStore implements RateLimitStore {
  private readonly subjects: LRUCache<string, { times: Float64Array; oldest: number; count: number }>;

  constructor(maxSubjects = 100_000) {
    this.subjects = new LRUCache({ max: maxSubjects });
  }

  // Async only to meet the interface: the decision is made before the first await, so hits are counted in call order.
  async hit(subject: string, limit: number, windowMs: number, now: number): Promise<RateDecision> {
    let entry = this.subjects.get(subject);
    // A subject's limit is fixed by its name; were one reused with another limit, its ring (sized
    // by the limit) would index wrongly, so it starts afresh.
    if (!entry || entry.times.length !== limit) {
      entry = { times: new Float64Array(limit), oldest: 0, count: 0 };
      this.subjects.set(subject, entry);
    }
    const cutoff = now - windowMs;
    const { times } = entry;
    while (entry.count > 0 && times[entry.oldest]! <= cutoff) {
      entry.oldest = (entry.oldest + 1) % limit;
      entry.count--;
    }
    if (entry.count >= limit) return { allowed: false, remaining: 0, resetMs: times[entry.oldest]! + windowMs - now };
    times[(entry.oldest + entry.count) % limit] = now;
    entry.count++;
    return { allowed: true, remaining: limit - entry.count, resetMs: times[entry.oldest]! + windowMs - now };
  }

  get size(): number {
    return this.subjects.size;
  }
}

const KEY_LIMIT = { limit: 120, windowMs: 60_000 } as const;

/** Count a keyed request: the decision for key `keyId`. */
export const hitKeyLimit = (store: RateLimitStore, keyId: number): Promise<RateDecision> =>
  store.hit(`key:${keyId}`, KEY_LIMIT.limit, KEY_LIMIT.windowMs, Date.now());

/** The headers every keyed response carries, and the 429 when the budget is spent. */
export const keyLimitHeaders = (decision: RateDecision): Record<string, string> => rateLimitHeaders(KEY_LIMIT.limit, decision);

/** The rate-limit headers of a response: the budget, what is left, and in how many seconds a place frees up. */
const rateLimitHeaders = (limit: number, decision: RateDecision): Record<string, string> => ({
  'X-RateLimit-Limit': String(limit),
  'X-RateLimit-Remaining': String(decision.remaining),
  'X-RateLimit-Reset': String(Math.max(0, Math.ceil(decision.resetMs / 1000))),
});
// One instance for every refusal: a client hammering past its budget should cost little (an Error
// captures a stack trace when created).
const KEY_LIMIT_EXCEEDED = new HttpError(429, 'RATE_LIMITED', 'Rate limit exceeded: 120 requests per minute per key', {
  'Retry-After': '60',
});
export const keyLimitExceeded = (): HttpError => KEY_LIMIT_EXCEEDED;

/** Per-client limit for a public route (`name` separates the budgets of different routes); an IPv6 client counts by its /64. */
export function ipRateLimit(store: RateLimitStore, name: string, limit: number, windowMs = 60_000): RouteStage {
  return async function ipRateLimitStage(ex) {
    const decision = await store.hit(`ip:${name}:${clientBucket(ex.state.clientIp)}`, limit, windowMs, Date.now());
    ex.set(rateLimitHeaders(limit, decision));
    if (!decision.allowed) {
      throw new HttpError(429, 'RATE_LIMITED', `Rate limit exceeded: ${limit} requests per minute`, { 'Retry-After': '60' });
    }
  };
}
