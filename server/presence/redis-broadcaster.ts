/**
 * Presence across instances (REDIS_URL): every event goes through one Redis channel, so a listener
 * on any instance sees the arrivals, departures and Library searches of all of them, and `here` is
 * the deployment's count. Each instance's own count travels with its events and in a heartbeat; a
 * newcomer asks for everyone's count when it subscribes, a closing instance says goodbye, and one
 * that goes silent (crashed) is forgotten after `staleMs`. While Redis does not answer, events stay
 * local — this instance's listeners still get them — and `here` falls back to what is known.
 *
 * Each event reaches each listener once, in the order one process without Redis would give:
 * - This instance's own events are delivered to its listeners at publish, synchronously (as
 *   in-process), and their echo from the channel is dropped. Delivering only the echo would make
 *   them wait on Redis, need a local fallback when it fails, and then a PUBLISH that timed out but
 *   still landed would come back a second time; a newcomer would also get its own `arrived` back.
 *   Delivered at publish, a listener only ever hears events created after it joined, as in-process.
 * - Events from other instances carry their origin and a sequence number: one delivered twice (a
 *   command resent by the client after a reconnect) is dropped, using a bounded window of recent ids.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Broadcaster, PresenceEvent } from './broadcaster.ts';
import { type IpSeats, LocalSeats, RedisSeats } from './seats.ts';

/** What travels on the channel: who sent it, that instance's listener count, and the event if any. */
interface Wire {
  from: string;
  local: number;
  event?: PresenceEvent;
  /** Per-origin sequence number of `event`, for de-duplication. */
  seq?: number;
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
  private readonly heartbeatMs: number;
  private readonly heartbeat: NodeJS.Timeout;
  private readonly recent = new RecentIds(4_096);
  private readonly seatKeepers: RedisSeats[] = [];
  private local = 0;
  private seq = 0;
  private closed = false;
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
    this.heartbeatMs = options.heartbeatMs ?? 5_000;
    subscriber.on('message', (channel: string, message: string) => {
      if (channel === this.channel) this.receive(message);
    });
    // Connection errors are reported by the shared connection (connectRedis); this one retries quietly.
    subscriber.on('error', () => undefined);
    // Reconnected: subscribe again (a no-op if the client already did) and ask for everyone's count.
    subscriber.on('ready', () => void this.join());
    this.ready = this.join();
    this.heartbeat = setInterval(() => this.send({ from: this.id, local: this.local }), this.heartbeatMs);
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
    void this.send({ from: this.id, local: this.local, event, seq: ++this.seq });
    // Ours are delivered here, once, whatever Redis does with them (the echo is dropped).
    this.deliver(event);
  }

  /** Per-IP places counted in Redis across instances; a crashed instance's expire after `staleMs`. */
  seats(max: number): IpSeats {
    if (!Number.isFinite(max)) return new LocalSeats(max);
    const seats = new RedisSeats(this.redis, {
      prefix: `${this.channel}:seats:`,
      instance: this.id,
      max,
      ttlMs: this.staleMs,
      refreshMs: this.heartbeatMs,
      log: this.log,
    });
    this.seatKeepers.push(seats);
    return seats;
  }

  subscribe(deliver: (event: PresenceEvent) => void): () => void {
    this.subscribers.add(deliver);
    return () => this.subscribers.delete(deliver);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    clearInterval(this.heartbeat);
    await Promise.all([this.send({ from: this.id, local: 0, gone: true }), ...this.seatKeepers.map((s) => s.close())]);
    this.closed = true;
    this.subscribers.clear();
    this.subscriber.disconnect();
  }

  private join(): Promise<void> {
    return this.subscriber.subscribe(this.channel).then(
      () => {
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
    if (wire.from === this.id) return; // our own: delivered at publish
    if (wire.gone) this.others.delete(wire.from);
    else this.others.set(wire.from, { local: wire.local, seen: Date.now() });
    if (wire.sync) void this.send({ from: this.id, local: this.local });
    if (wire.event && typeof wire.event === 'object' && typeof wire.event.type === 'string' && this.firstTime(wire))
      this.deliver(wire.event);
  }

  /** False for an event of another instance seen already (no sequence number: always first). */
  private firstTime(wire: Wire): boolean {
    return typeof wire.seq !== 'number' || this.recent.add(`${wire.from}:${wire.seq}`);
  }

  private deliver(event: PresenceEvent): void {
    // Counts in arrived/left are the deployment's, whichever instance the change happened on.
    const told = 'here' in event ? { ...event, here: this.here(this.local) } : event;
    for (const deliver of this.subscribers) deliver(told);
  }
}

/** The last `size` ids seen, oldest forgotten first. */
class RecentIds {
  private readonly ids = new Set<string>();

  constructor(private readonly size: number) {}

  /** False when `id` is among the recent ones; otherwise remembers it. */
  add(id: string): boolean {
    if (this.ids.has(id)) return false;
    this.ids.add(id);
    if (this.ids.size > this.size) this.ids.delete(this.ids.values().next().value!);
    return true;
  }
}
