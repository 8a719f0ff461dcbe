/**
 * Guide session state: the recent turns of a visitor's conversation and the follow-ups (real
 * Library answers) waiting to be fetched. Behind an asynchronous interface: in memory (bounded by
 * sessions, turns, follow-ups and idle time) or in Redis (REDIS_URL), shared between instances.
 */
import type { Redis } from 'ioredis';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import { RedisOrLocal } from '../state/redis.ts';

export interface Turn {
  role: 'user' | 'assistant';
  content: string;
}

export interface Followup {
  text: string;
  sources: string[];
  audioUrls?: string[];
  /** true when the Library could not answer and the text comes from the exhibition context alone. */
  fallback: boolean;
}

export interface GuideSessionStore {
  turns(key: string): Promise<Turn[]>;
  /** Append turns, keeping only the most recent ones. */
  addTurns(key: string, turns: Turn[]): Promise<void>;
  /** Note that a follow-up is being prepared for the session. */
  beginFollowup(key: string): Promise<void>;
  /** Deliver a prepared follow-up (ends one pending preparation). */
  putFollowup(key: string, followup: Followup): Promise<void>;
  /** Take the oldest ready follow-up (delivered once), and whether more are still being prepared. */
  takeFollowup(key: string): Promise<{ followup: Followup | null; pending: boolean }>;
  close(): Promise<void>;
}

interface Session {
  turns: Turn[];
  ready: Followup[];
  pending: number;
}

export interface MemorySessionOptions {
  maxSessions?: number;
  maxTurns?: number;
  maxFollowups?: number;
  idleMs?: number;
  now?: () => number;
}

export class MemorySessionStore implements GuideSessionStore {
  /** Bounded by `maxSessions` (beyond it the least recently used session goes) and by idle time. */
  private readonly sessions: LRUCache<string, Session>;
  private readonly maxTurns: number;
  private readonly maxFollowups: number;
  private readonly sweeper: NodeJS.Timeout;

  constructor(options: MemorySessionOptions = {}) {
    const idleMs = options.idleMs ?? 30 * 60_000;
    this.sessions = new LRUCache({
      max: options.maxSessions ?? 10_000,
      ttl: idleMs,
      updateAgeOnGet: true,
      // The clock read at every check, not cached for a millisecond: tests move `now` by hand.
      ttlResolution: 0,
      ...(options.now ? { perf: { now: options.now } } : {}),
    });
    this.maxTurns = options.maxTurns ?? 12;
    this.maxFollowups = options.maxFollowups ?? 3;
    // Idle sessions leave memory within a minute, not only when they are asked for or pushed out.
    this.sweeper = setInterval(() => this.sessions.purgeStale(), Math.min(idleMs, 60_000));
    this.sweeper.unref();
  }

  get size(): number {
    return this.sessions.size;
  }

  async turns(key: string): Promise<Turn[]> {
    return [...(this.live(key)?.turns ?? [])];
  }

  async addTurns(key: string, turns: Turn[]): Promise<void> {
    const s = this.session(key);
    s.turns.push(...turns);
    if (s.turns.length > this.maxTurns) s.turns.splice(0, s.turns.length - this.maxTurns);
  }

  async beginFollowup(key: string): Promise<void> {
    this.session(key).pending++;
  }

  async putFollowup(key: string, followup: Followup): Promise<void> {
    const s = this.session(key);
    s.pending = Math.max(0, s.pending - 1);
    s.ready.push(followup);
    if (s.ready.length > this.maxFollowups) s.ready.splice(0, s.ready.length - this.maxFollowups);
  }

  async takeFollowup(key: string): Promise<{ followup: Followup | null; pending: boolean }> {
    const s = this.live(key);
    if (!s) return { followup: null, pending: false };
    return { followup: s.ready.shift() ?? null, pending: s.pending > 0 };
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.sessions.clear();
  }

  /** The session if it exists and is not idle-expired (marking it as used). */
  private live(key: string): Session | undefined {
    return this.sessions.get(key);
  }

  private session(key: string): Session {
    let s = this.live(key);
    if (!s) {
      s = { turns: [], ready: [], pending: 0 };
      this.sessions.set(key, s);
    }
    return s;
  }
}

/**
 * Sessions shared by every instance (REDIS_URL), so a follow-up prepared on one instance is fetched
 * from another. Per session: a list of turns and a list of ready follow-ups (both trimmed to their
 * bounds) and a pending counter; every key expires after `idleMs` without use, which is the bound
 * on sessions. While Redis does not answer, the instance keeps sessions in memory (the fallback)
 * and says so once: a visitor may lose context across instances, never get an error.
 */
export class RedisSessionStore implements GuideSessionStore {
  private readonly maxTurns: number;
  private readonly maxFollowups: number;
  private readonly idleMs: number;
  private readonly prefix: string;
  private readonly putScript: (...args: Array<string | number>) => Promise<unknown>;
  private readonly shared: RedisOrLocal;

  constructor(
    private readonly redis: Redis,
    private readonly fallback: GuideSessionStore,
    log: Logger,
    options: Omit<MemorySessionOptions, 'maxSessions' | 'now'> & { prefix?: string } = {},
  ) {
    this.maxTurns = options.maxTurns ?? 12;
    this.maxFollowups = options.maxFollowups ?? 3;
    this.idleMs = options.idleMs ?? 30 * 60_000;
    this.prefix = options.prefix ?? 'museum:guide:';
    redis.defineCommand('museumPutFollowup', { numberOfKeys: 2, lua: PUT_FOLLOWUP });
    this.putScript = (redis as unknown as { museumPutFollowup: RedisSessionStore['putScript'] }).museumPutFollowup.bind(redis);
    this.shared = new RedisOrLocal(log, {
      down: 'Redis does not answer: guide sessions are kept on this instance until it does',
      back: 'guide sessions are shared through Redis again',
    });
  }

  private keys(key: string) {
    const base = this.prefix + key;
    return { turns: `${base}:turns`, ready: `${base}:ready`, pending: `${base}:pending` };
  }

  turns(key: string): Promise<Turn[]> {
    const k = this.keys(key);
    return this.shared.run(
      async () => {
        const [[err, items]] = (await this.redis.multi().lrange(k.turns, 0, -1).pexpire(k.turns, this.idleMs).exec())!;
        if (err) throw err;
        return (items as string[]).map((item) => JSON.parse(item) as Turn);
      },
      () => this.fallback.turns(key),
    );
  }

  addTurns(key: string, turns: Turn[]): Promise<void> {
    if (!turns.length) return Promise.resolve();
    const k = this.keys(key);
    return this.shared.run(
      async () => {
        const results = await this.redis
          .multi()
          .rpush(k.turns, ...turns.map((t) => JSON.stringify(t)))
          .ltrim(k.turns, -this.maxTurns, -1)
          .pexpire(k.turns, this.idleMs)
          .exec();
        throwFirst(results);
      },
      () => this.fallback.addTurns(key, turns),
    );
  }

  beginFollowup(key: string): Promise<void> {
    const k = this.keys(key);
    return this.shared.run(
      async () => throwFirst(await this.redis.multi().incr(k.pending).pexpire(k.pending, this.idleMs).exec()),
      () => this.fallback.beginFollowup(key),
    );
  }

  putFollowup(key: string, followup: Followup): Promise<void> {
    const k = this.keys(key);
    return this.shared.run(
      async () => {
        await this.putScript(k.pending, k.ready, JSON.stringify(followup), this.maxFollowups, this.idleMs);
      },
      () => this.fallback.putFollowup(key, followup),
    );
  }

  takeFollowup(key: string): Promise<{ followup: Followup | null; pending: boolean }> {
    const k = this.keys(key);
    return this.shared.run(
      async () => {
        const results = await this.redis.multi().lpop(k.ready).get(k.pending).exec();
        throwFirst(results);
        const [[, item], [, pending]] = results!;
        return { followup: item ? (JSON.parse(item as string) as Followup) : null, pending: Number(pending ?? 0) > 0 };
      },
      () => this.fallback.takeFollowup(key),
    );
  }

  close(): Promise<void> {
    return this.fallback.close();
  }
}

// One pending preparation ends (never below zero) and its follow-up joins the ready ones (bounded).
const PUT_FOLLOWUP = `
local pending = redis.call('DECR', KEYS[1])
if pending < 0 then redis.call('SET', KEYS[1], 0) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[2]), -1)
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
`;

/** A MULTI's results carry per-command errors: surface the first. */
function throwFirst(results: Array<[Error | null, unknown]> | null): void {
  if (!results) throw new Error('Redis transaction was discarded');
  for (const [err] of results) if (err) throw err;
}
