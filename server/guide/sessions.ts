/**
 * Guide session state: the recent turns of a visitor's conversation and the follow-ups (real
 * Library answers) waiting to be fetched. Behind an asynchronous interface so a Redis store can
 * share it between instances; the in-memory store is bounded by sessions, turns, follow-ups and
 * idle time.
 */

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
  close(): void | Promise<void>;
}

interface Session {
  turns: Turn[];
  ready: Followup[];
  pending: number;
  touched: number;
}

export interface MemorySessionOptions {
  maxSessions?: number;
  maxTurns?: number;
  maxFollowups?: number;
  idleMs?: number;
  now?: () => number;
}

export class MemorySessionStore implements GuideSessionStore {
  private readonly sessions = new Map<string, Session>();
  private readonly maxSessions: number;
  private readonly maxTurns: number;
  private readonly maxFollowups: number;
  private readonly idleMs: number;
  private readonly now: () => number;
  private readonly sweeper: NodeJS.Timeout;

  constructor(options: MemorySessionOptions = {}) {
    this.maxSessions = options.maxSessions ?? 10_000;
    this.maxTurns = options.maxTurns ?? 12;
    this.maxFollowups = options.maxFollowups ?? 3;
    this.idleMs = options.idleMs ?? 30 * 60_000;
    this.now = options.now ?? Date.now;
    this.sweeper = setInterval(() => this.sweep(), Math.min(this.idleMs, 60_000));
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

  close(): void {
    clearInterval(this.sweeper);
    this.sessions.clear();
  }

  /** The session if it exists and is not idle-expired (refreshing its LRU position). */
  private live(key: string): Session | undefined {
    const s = this.sessions.get(key);
    if (!s) return undefined;
    this.sessions.delete(key);
    if (this.now() - s.touched > this.idleMs) return undefined;
    s.touched = this.now();
    this.sessions.set(key, s);
    return s;
  }

  private session(key: string): Session {
    let s = this.live(key);
    if (!s) {
      s = { turns: [], ready: [], pending: 0, touched: this.now() };
      this.sessions.set(key, s);
      // Least recently used first.
      while (this.sessions.size > this.maxSessions) this.sessions.delete(this.sessions.keys().next().value!);
    }
    return s;
  }

  private sweep(): void {
    const cutoff = this.now() - this.idleMs;
    // Map order is least recently used first: stop at the first live session.
    for (const [key, s] of this.sessions) {
      if (s.touched > cutoff) break;
      this.sessions.delete(key);
    }
  }
}
