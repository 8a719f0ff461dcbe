/**
 * Listener places per client IP (decisions: at most PRESENCE_MAX_PER_IP per client IP). One
 * instance counts them in memory; several instances count them in Redis so the cap holds for the
 * deployment, not per machine.
 *
 * In Redis each instance keeps its own hash (`<prefix><instance>`: ip → listeners) with a TTL it
 * refreshes while alive, plus a set of instance ids. A join runs one script: increment our count,
 * sum every live instance's count for the IP, undo and refuse if over the cap — atomic, so
 * concurrent joins on any instances cannot overshoot. A crashed instance stops refreshing, its hash
 * expires after `ttlMs` and stops counting: a crash holds places for at most that long. The refresh
 * rewrites our hash from memory, so a lost release or a timed-out join heals within `refreshMs`.
 * While Redis does not answer, joins fall back to this instance's own count.
 */
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { clientBucket } from '../../common/net.ts';
import { RedisOrLocal } from '../state/redis.ts';

/** One listener place held for a client IP; `release` gives it back (repeat calls do nothing). */
export interface Seat {
  readonly ip: string;
  release(): void;
}

export interface IpSeats {
  /** A place for a client at `address` (counted by clientBucket: an IPv6 client by its /64), or null when it holds its share already. */
  take(ip: string): Promise<Seat | null>;
  close(): Promise<void>;
}

/** Places counted per client IP: entries exist only while an address holds one (bounded by listeners). */
class Tally {
  private readonly counts = new Map<string, number>();

  get(ip: string): number {
    return this.counts.get(ip) ?? 0;
  }

  add(ip: string, delta: number): void {
    const n = this.get(ip) + delta;
    if (n > 0) this.counts.set(ip, n);
    else this.counts.delete(ip);
  }

  entries(): IterableIterator<[string, number]> {
    return this.counts.entries();
  }
}

function seatFor(ip: string, onRelease: () => void): Seat {
  let held = true;
  return {
    ip,
    release() {
      if (!held) return;
      held = false;
      onRelease();
    },
  };
}

/** This instance alone. */
export class LocalSeats implements IpSeats {
  private readonly tally = new Tally();

  constructor(private readonly max: number) {}

  take(address: string): Promise<Seat | null> {
    const ip = clientBucket(address);
    if (this.tally.get(ip) >= this.max) return Promise.resolve(null);
    this.tally.add(ip, 1);
    return Promise.resolve(seatFor(ip, () => this.tally.add(ip, -1)));
  }

  async close(): Promise<void> {}
}

// ARGV: prefix, instance, ip, max, ttl ms. Returns 1 when admitted, 0 when over the cap.
const TAKE = `
local prefix, me, ip, max = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local all, mine = prefix .. 'all', prefix .. me
local total = redis.call('HINCRBY', mine, ip, 1)
redis.call('PEXPIRE', mine, ARGV[5])
redis.call('SADD', all, me)
for _, other in ipairs(redis.call('SMEMBERS', all)) do
  if other ~= me then
    local key = prefix .. other
    if redis.call('EXISTS', key) == 0 then redis.call('SREM', all, other)
    else total = total + tonumber(redis.call('HGET', key, ip) or '0') end
  end
end
if total <= max then return 1 end
if redis.call('HINCRBY', mine, ip, -1) <= 0 then redis.call('HDEL', mine, ip) end
return 0`;

// ARGV: prefix, instance, ip.
const RELEASE = `
local mine = ARGV[1] .. ARGV[2]
if redis.call('HINCRBY', mine, ARGV[3], -1) <= 0 then redis.call('HDEL', mine, ARGV[3]) end
return 0`;

export interface RedisSeatsOptions {
  /** Key prefix, e.g. `museum:presence:seats:`. */
  prefix: string;
  instance: string;
  max: number;
  ttlMs: number;
  refreshMs: number;
  log: Logger;
}

/** The deployment, through Redis; this instance's own count while Redis does not answer. */
export class RedisSeats implements IpSeats {
  /** This instance's places per IP (joins in flight included), whatever Redis said. */
  private readonly tally = new Tally();
  private readonly fallback: RedisOrLocal;
  private readonly refresher: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly redis: Redis,
    private readonly options: RedisSeatsOptions,
  ) {
    this.fallback = new RedisOrLocal(options.log, {
      down: 'presence: Redis unreachable; listeners per IP are capped per instance for now',
      back: 'presence: Redis answers again; listeners per IP are capped across instances',
    });
    this.refresher = setInterval(() => void this.refresh(), options.refreshMs);
    this.refresher.unref();
  }

  async take(address: string): Promise<Seat | null> {
    const ip = clientBucket(address);
    if (this.tally.get(ip) >= this.options.max) return null;
    // Counted before Redis answers: concurrent joins on this instance see it.
    this.tally.add(ip, 1);
    const verdict = await this.fallback.run(
      () => this.takeShared(ip),
      () => 'local' as const,
    );
    if (verdict === 'refused') {
      this.tally.add(ip, -1);
      return null;
    }
    return seatFor(ip, () => this.release(ip, verdict === 'shared'));
  }

  /** Forget this instance's places at once (a crash is covered by the TTL instead). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.refresher);
    const { prefix, instance } = this.options;
    await this.redis
      .multi()
      .del(prefix + instance)
      .srem(`${prefix}all`, instance)
      .exec()
      .catch(() => undefined);
  }

  private async takeShared(ip: string): Promise<'shared' | 'refused'> {
    const { prefix, instance, max, ttlMs } = this.options;
    const admitted = await this.redis.eval(TAKE, 0, prefix, instance, ip, max, ttlMs);
    return admitted === 1 ? 'shared' : 'refused';
  }

  private release(ip: string, shared: boolean): void {
    this.tally.add(ip, -1);
    if (!shared || this.closed) return;
    const { prefix, instance } = this.options;
    // A failed release is healed by the next refresh, which rewrites our counts.
    this.redis.eval(RELEASE, 0, prefix, instance, ip).catch(() => undefined);
  }

  /**
   * Rewrite this instance's counts from memory and keep them alive for another TTL. A join in
   * flight is written too; should its script run after this, it counts twice until the next refresh
   * (erring towards refusing, never past the cap).
   */
  private async refresh(): Promise<void> {
    const { prefix, instance, ttlMs } = this.options;
    const mine = prefix + instance;
    const counts = [...this.tally.entries()].flat();
    const tx = this.redis.multi().del(mine);
    if (counts.length)
      tx.hset(mine, ...counts)
        .pexpire(mine, ttlMs)
        .sadd(`${prefix}all`, instance);
    await tx.exec().catch(() => undefined);
  }
}
