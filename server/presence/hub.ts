/**
 * The presence hub: holds the open SSE listeners of this instance and writes presence events to
 * them. Design points, each for a reason:
 * - Every event is encoded once (one shared Buffer per framing) and written to each listener's
 *   socket directly: no per-listener JSON, no per-listener chunk-header allocations.
 * - A listener is a socket with a bounded userland buffer: a listener that does not read is
 *   dropped once more than `maxBufferedBytes` wait for it, so it never holds memory or delays the
 *   others (writes never wait for a slow peer). A listener whose socket refused a write (its
 *   buffer is full: `write()` returned false) and has not drained within `drainTimeoutMs` is
 *   dropped too, however little waits: a peer that stopped reading does not keep its place.
 * - At most `maxPerIp` listeners per client IP (the one the request context decided, so the
 *   forwarded address behind TRUST_PROXY): one address cannot take every place. The places are
 *   counted by the broadcaster's seats, so across instances when events are (seats.ts).
 * - Connection churn is N² writes (every arrival to every listener). Above `coalesceAbove`
 *   listeners, arrived/left are folded into at most one event per `coalesceMs` carrying the
 *   current `here`; at or below it, one event per change.
 * - Events go through a Broadcaster: in-process, or through Redis across instances (REDIS_URL).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Broadcaster, PresenceEvent } from './broadcaster.ts';
import type { IpSeats, Seat } from './seats.ts';

export interface PresenceHubOptions {
  broadcaster: Broadcaster;
  capacity: number;
  coalesceAbove: number;
  coalesceMs: number;
  keepaliveMs?: number;
  maxBufferedBytes?: number;
  /** Listeners per client IP. */
  maxPerIp?: number;
  /** How long a listener's socket may stay undrained after a refused write before it is dropped. */
  drainTimeoutMs?: number;
}

/** One event's bytes, written through each listener's response (Node frames the chunks). */
type Frame = Buffer;

interface Listener {
  sink: ServerResponse;
  /** Position in `listeners` (swap-remove keeps removal O(1)). */
  index: number;
  /** Its place among its client IP's; given back when it leaves. */
  seat: Seat;
  /** Set while a refused write waits for 'drain'. */
  drainTimer: NodeJS.Timeout | null;
}

const encodeText = (text: string): Frame => Buffer.from(text);

const encodeEvent = (event: PresenceEvent): Frame => encodeText(`data: ${JSON.stringify(event)}\n\n`);

const KEEPALIVE = encodeText(': keepalive\n\n');
/** Sent as a stream ends with the server (shutdown): reconnect soon, to whichever instance answers. */
const RETRY = encodeText('retry: 1000\n\n');

export class PresenceHub {
  private readonly listeners: Listener[] = [];
  private readonly broadcaster: Broadcaster;
  private readonly unsubscribe: () => void;
  private readonly keepalive: NodeJS.Timeout;
  private coalesceTimer: NodeJS.Timeout | null = null;
  /** The `here` listeners were last told (by hello, arrived or left). */
  private lastAnnounced = 0;
  private closed = false;
  readonly capacity: number;
  private readonly coalesceAbove: number;
  private readonly coalesceMs: number;
  private readonly maxBufferedBytes: number;
  private readonly drainTimeoutMs: number;
  private readonly seats: IpSeats;

  constructor(options: PresenceHubOptions) {
    this.broadcaster = options.broadcaster;
    this.capacity = options.capacity;
    this.coalesceAbove = options.coalesceAbove;
    this.coalesceMs = options.coalesceMs;
    this.maxBufferedBytes = options.maxBufferedBytes ?? 64 * 1024;
    this.drainTimeoutMs = options.drainTimeoutMs ?? 30_000;
    this.seats = this.broadcaster.seats(options.maxPerIp ?? Infinity);
    this.unsubscribe = this.broadcaster.subscribe((event) => this.deliver(encodeEvent(event)));
    this.keepalive = setInterval(() => this.deliver(KEEPALIVE), options.keepaliveMs ?? 25_000);
    this.keepalive.unref();
  }

  get size(): number {
    return this.listeners.length;
  }

  get full(): boolean {
    return this.listeners.length >= this.capacity;
  }

  /** A listener place for `ip`, or null when the address holds its share already. */
  admit(ip: string): Promise<Seat | null> {
    return this.seats.take(ip);
  }

  /**
   * Take over a response whose status and SSE headers are set: send the headers and `hello`, then
   * keep the connection as a listener until it closes. The caller checked `full` and got `seat`
   * from `admit` first; the listener gives it back when it leaves.
   */
  attach(req: IncomingMessage, res: ServerResponse, seat: Seat): void {
    const socket = req.socket;
    // A client that hung up while the request was routed: its 'close' has fired already.
    if (socket.destroyed || res.closed) {
      seat.release();
      return;
    }
    socket.setTimeout(0);
    socket.setNoDelay(true);
    // Peers that vanish without a FIN are found by TCP keepalive probes even when nothing is sent.
    socket.setKeepAlive(true, 60_000);
    const here = this.listeners.length + 1;
    // Announce before adding: the newcomer learns the count from its own hello.
    this.changed('arrived', here);
    socket.cork();
    res.flushHeaders();
    const listener: Listener = {
      sink: res,
      index: this.listeners.length,
      seat,
      drainTimer: null,
    };
    this.listeners.push(listener);
    const hello = encodeEvent({ type: 'hello', here: this.broadcaster.here(here), at: Date.now() });
    this.write(listener, hello);
    socket.uncork();
    res.once('close', () => this.remove(listener));
  }

  /** Broadcast the fact of a Library search; returns the current count (the deployment's). */
  librarySearch(handle: string): number {
    this.broadcaster.publish({ type: 'library-search', handle, at: Date.now() });
    return this.broadcaster.here(this.listeners.length);
  }

  private remove(listener: Listener): void {
    const { index } = listener;
    if (this.listeners[index] !== listener) return;
    const last = this.listeners.pop()!;
    if (last !== listener) {
      this.listeners[index] = last;
      last.index = index;
    }
    listener.index = -1;
    if (listener.drainTimer) clearTimeout(listener.drainTimer);
    listener.seat.release();
    if (!this.closed) this.changed('left', this.listeners.length);
  }

  private changed(type: 'arrived' | 'left', here: number): void {
    if (here > this.coalesceAbove) {
      this.coalesceTimer ??= setTimeout(() => this.flushCoalesced(), this.coalesceMs);
      return;
    }
    if (this.coalesceTimer) {
      clearTimeout(this.coalesceTimer);
      this.coalesceTimer = null;
    }
    this.lastAnnounced = here;
    this.broadcaster.publish({ type, here, at: Date.now() });
  }

  private flushCoalesced(): void {
    this.coalesceTimer = null;
    const here = this.listeners.length;
    if (here === this.lastAnnounced) return;
    const type = here > this.lastAnnounced ? 'arrived' : 'left';
    this.lastAnnounced = here;
    this.broadcaster.publish({ type, here, at: Date.now() });
  }

  /** Write one frame to every listener; drop those whose unread backlog exceeds the bound. */
  private deliver(frame: Frame): void {
    const list = this.listeners;
    let slow: Listener[] | null = null;
    for (let i = 0; i < list.length; i++) {
      const listener = list[i]!;
      const sink = listener.sink;
      if (sink.writableEnded || sink.destroyed) continue;
      this.write(listener, frame);
      if (sink.writableLength > this.maxBufferedBytes) (slow ??= []).push(listener);
    }
    // Destroying closes the connection; its 'close' handler removes it and announces `left`.
    if (slow) for (const listener of slow) listener.sink.destroy();
  }

  /** Write to a listener; a refused write (full buffer) starts its drain deadline. */
  private write(listener: Listener, bytes: Buffer): void {
    if (listener.sink.write(bytes) || listener.drainTimer) return;
    const { sink } = listener;
    const drained = () => {
      if (listener.drainTimer) clearTimeout(listener.drainTimer);
      listener.drainTimer = null;
    };
    listener.drainTimer = setTimeout(() => {
      sink.off('drain', drained);
      listener.drainTimer = null;
      sink.destroy(); // its 'close' handler removes it and announces `left`
    }, this.drainTimeoutMs);
    listener.drainTimer.unref();
    sink.once('drain', drained);
  }

  /** End every stream cleanly, with a `retry:` hint, and stop the timers (server shutdown). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.keepalive);
    if (this.coalesceTimer) clearTimeout(this.coalesceTimer);
    this.unsubscribe();
    for (const listener of this.listeners.splice(0)) {
      const { sink } = listener;
      if (listener.drainTimer) clearTimeout(listener.drainTimer);
      listener.seat.release(); // `remove` skips listeners closed here
      if (sink.destroyed) continue;
      sink.end(RETRY);
    }
  }
}
