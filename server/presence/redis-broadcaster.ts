/**
 * Presence across instances (REDIS_URL): every event goes through one Redis channel, so a listener
 * on any instance sees the arrivals, departures and Library searches of all of them, and `here` is
 * the deployment's count. Each instance's own count travels with its events and in a heartbeat; a
 * newcomer asks for everyone's count when it subscribes, a closing instance says goodbye, and one
 * that goes silent (crashed) is forgotten after `staleMs`. While Redis does not answer, events stay
 * local — this instance's listeners still get them — and `here` falls back to what is known.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Broadcaster, PresenceEvent } from './broadcaster.ts';

/** What travels on the channel: who sent it, that instance's listener count, and the event if any. */
interface Wire {
  from: string;
  local: number;
  event?: PresenceEvent;
  /** A newcomer asks every instance for its count. */
  sync?: true;
  /** The sender is closing: forget its count now. */
  gone?: true;
}

export interface RedisBroadcasterOptions {
  channel?: string;
  heartbeatMs?: number;
  staleMs?: number;
}

export class RedisBroadcaster implements Broadcaster {
  private readonly id = randomBytes(6).toString('hex');
  private readonly subscribers = new Set<(event: PresenceEvent) => void>();
  /** Other instances: their last known count and when we heard from them. */
  private readonly others = new Map<string, { local: number; seen: number }>();
  private readonly channel: string;
  private readonly staleMs: number;
  private readonly heartbeat: NodeJS.Timeout;
  private local = 0;
  private closed = false;
  /** Our own events come back through the channel only while we are subscribed to it. */
  private subscribed = false;
  /** Settles once the channel subscription is in place (or has failed; events then stay local). */
  readonly ready: Promise<void>;

  constructor(
    private readonly redis: Redis,
    private readonly subscriber: Redis,
    private readonly log: Logger,
    options: RedisBroadcasterOptions = {},
  ) {
    this.channel = options.channel ?? 'museum:presence';
    this.staleMs = options.staleMs ?? 15_000;
    subscriber.on('message', (channel: string, message: string) => {
      if (channel === this.channel) this.receive(message);
    });
    // Connection errors are reported by the shared connection (connectRedis); this one retries quietly.
    subscriber.on('error', () => undefined);
    subscriber.on('close', () => {
      this.subscribed = false;
    });
    // Reconnected: subscribe again (a no-op if the client already did) and ask for everyone's count.
    subscriber.on('ready', () => void this.join());
    this.ready = this.join();
    this.heartbeat = setInterval(() => this.send({ from: this.id, local: this.local }), options.heartbeatMs ?? 5_000);
    this.heartbeat.unref();
  }

  /** The deployment's count, given this instance's. */
  here(local: number): number {
    const now = Date.now();
    let total = local;
    for (const [id, other] of this.others) {
      if (now - other.seen > this.staleMs) this.others.delete(id);
      else total += other.local;
    }
    return total;
  }

  publish(event: PresenceEvent): void {
    if ('here' in event) this.local = event.here;
    const sent = this.send({ from: this.id, local: this.local, event });
    // Off the channel (not subscribed, or Redis did not take it): this instance's listeners still
    // hear of it, from here.
    if (!this.subscribed) this.deliver(event);
    else
      void sent.then((ok) => {
        if (!ok && !this.closed) this.deliver(event);
      });
  }

  subscribe(deliver: (event: PresenceEvent) => void): () => void {
    this.subscribers.add(deliver);
    return () => this.subscribers.delete(deliver);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    clearInterval(this.heartbeat);
    await this.send({ from: this.id, local: 0, gone: true });
    this.closed = true;
    this.subscribers.clear();
    this.subscriber.disconnect();
  }

  private join(): Promise<void> {
    return this.subscriber.subscribe(this.channel).then(
      () => {
        this.subscribed = true;
        void this.send({ from: this.id, local: this.local, sync: true });
      },
      (err: Error) => this.log.warn({ err: err.message }, 'presence: Redis subscription failed; events stay on this instance for now'),
    );
  }

  /** Publish on the channel; false when Redis did not take it. */
  private async send(wire: Wire): Promise<boolean> {
    if (this.closed) return false;
    try {
      await this.redis.publish(this.channel, JSON.stringify(wire));
      return true;
    } catch {
      return false;
    }
  }

  private receive(message: string): void {
    let wire: Wire;
    try {
      wire = JSON.parse(message) as Wire;
    } catch {
      return; // not ours
    }
    if (typeof wire?.from !== 'string' || typeof wire.local !== 'number') return;
    if (wire.from !== this.id) {
      if (wire.gone) this.others.delete(wire.from);
      else this.others.set(wire.from, { local: wire.local, seen: Date.now() });
      if (wire.sync) void this.send({ from: this.id, local: this.local });
    }
    if (wire.event && typeof wire.event === 'object' && typeof wire.event.type === 'string') this.deliver(wire.event);
  }

  private deliver(event: PresenceEvent): void {
    // Counts in arrived/left are the deployment's, whichever instance the change happened on.
    const told = 'here' in event ? { ...event, here: this.here(this.local) } : event;
    for (const deliver of this.subscribers) deliver(told);
  }
}
