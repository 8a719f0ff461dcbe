/**
 * The presence fan-out seam. A hub publishes every presence event here and receives every event
 * (its own included) from here; in one process that is a synchronous call, and a Redis-backed
 * implementation (PUBLISH/SUBSCRIBE on one channel) can replace it for several instances without
 * touching the hub. Events are plain JSON values so they can cross a process boundary; each
 * receiving hub encodes an event once for all of its listeners.
 *
 * A hub publishes arrived/left with its own count in `here`; what listeners are told is `here(…)`:
 * the count of this instance alone in one process, the deployment's with a multi-instance fan-out
 * (redis-broadcaster.ts), which also rewrites `here` in the arrived/left events it delivers.
 *
 * The listener places per client IP are counted where the events go (seats.ts): one cap for what
 * one fan-out serves.
 */
import { type IpSeats, LocalSeats } from './seats.ts';

export type PresenceEvent =
  | { type: 'hello' | 'arrived' | 'left'; here: number; at: number }
  | { type: 'library-search'; handle: string; at: number };

export interface Broadcaster {
  /** Send an event to every subscriber of every instance. */
  publish(event: PresenceEvent): void;
  /** Receive every published event; returns the unsubscribe function. */
  subscribe(deliver: (event: PresenceEvent) => void): () => void;
  /** The count listeners are told, given this instance's own. */
  here(local: number): number;
  /** Listener places per client IP, at most `max` each (closed with the broadcaster). */
  seats(max: number): IpSeats;
  close(): Promise<void>;
}

/** Single-process fan-out: delivery is synchronous, in publish order. */
export class InProcessBroadcaster implements Broadcaster {
  private readonly subscribers = new Set<(event: PresenceEvent) => void>();

  publish(event: PresenceEvent): void {
    for (const deliver of this.subscribers) deliver(event);
  }

  subscribe(deliver: (event: PresenceEvent) => void): () => void {
    this.subscribers.add(deliver);
    return () => this.subscribers.delete(deliver);
  }

  here(local: number): number {
    return local;
  }

  seats(max: number): IpSeats {
    return new LocalSeats(max);
  }

  async close(): Promise<void> {
    this.subscribers.clear();
  }
}
