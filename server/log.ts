/**
 * The server's logger as shipped: pino JSON lines on stderr, batched and written asynchronously.
 *
 * Lines are copied into a Buffer as they come (no string concatenation, no per-line system call) and
 * leave in one `write(2)` once `batchBytes` are held or the oldest is `flushMs` old. pino's own
 * asynchronous destination (sonic-boom) was measured at 2.2 µs of CPU per access line, a tenth of a
 * whole fast-path answer, because it concatenates strings and re-measures their byte lengths; this
 * one costs 0.15–0.25 µs (bench/serve.ts; the reasoning in bench/RESULTS.md, "Serve"). A writer may
 * also hold its lines unformatted and format them a batch at a time (the access log, `hold`): they
 * are drained before any other line, when the flush interval ends, on flush and at exit, so the
 * order and the guarantees below hold for them too.
 *
 * Bounded: past `maxPendingBytes` waiting for a destination that cannot keep up (a stalled pipe),
 * lines are dropped and counted, and one line saying how many is written once it catches up — the
 * memory stays bounded and the loss is visible. `flushLog` (the last step of the server's shutdown
 * sequence) resolves once every accepted line is written; whatever ends the process, what is still
 * held is written synchronously when it exits.
 */
import { write, writeSync } from 'node:fs';
import pino, { type Logger } from 'pino';

export interface LogDestinationOptions {
  batchBytes?: number;
  flushMs?: number;
  maxPendingBytes?: number;
}

interface Chunk {
  buffer: Buffer;
  start: number;
  end: number;
  /** The whole batch buffer `buffer` was cut from, reusable once written (other chunks: null). */
  batch: Buffer | null;
}

/** Destinations holding lines not yet written: what the exit handler writes synchronously. */
const holding = new Set<LogDestination>();
let exitHandlerInstalled = false;
const RETRY_MS = 10;

/** How many lines a string of whole lines holds (only counted when lines are dropped). */
const linesIn = (text: string): number => Math.max(text.split('\n').length - 1, 1);

/** Lines held unformatted by their writer (the access log): written by `drain`, in order. */
export interface HeldLines {
  drain(): void;
}

/** A batched asynchronous writer of log lines to a file descriptor (pino's destination stream). */
export class LogDestination {
  private readonly batchBytes: number;
  private readonly flushMs: number;
  private readonly maxPendingBytes: number;
  /** The batch being filled. */
  private current: Buffer;
  private used = 0;
  /** Filled batches (and their unwritten remainders) waiting for the one write in flight. */
  private readonly queue: Chunk[] = [];
  private queuedBytes = 0;
  private writing = false;
  private timer: NodeJS.Timeout | null = null;
  private spare: Buffer | null = null;
  private dropped = 0;
  private broken = false;
  private waiters: Array<() => void> = [];
  /** Writers holding lines (see `hold`): drained before any other line, and before a write to disk. */
  private readonly heldBy = new Set<HeldLines>();

  constructor(
    private readonly fd: number,
    options: LogDestinationOptions = {},
  ) {
    // 1 MB, not 64 KB: each write is a hand-off to libuv's thread pool, which here costs tens of µs
    // of the process's CPU whatever the write's size (a thread woken on the server's core). In situ,
    // 16 KB batches cost 2 % more CPU per slots answer than 64 KB, and 256 KB–1 MB 3–6 % less
    // (bench/RESULTS.md, Serve). Lines still leave within `flushMs` when traffic is light.
    this.batchBytes = options.batchBytes ?? 1024 * 1024;
    this.flushMs = options.flushMs ?? 500;
    this.maxPendingBytes = options.maxPendingBytes ?? 64 * 1024 * 1024;
    this.current = Buffer.allocUnsafe(this.batchBytes);
    if (!exitHandlerInstalled) {
      exitHandlerInstalled = true;
      process.on('exit', () => {
        for (const destination of holding) destination.flushSync();
      });
    }
  }

  write(line: string): boolean {
    if (this.heldBy.size > 0) this.drainHeld();
    return this.append(line);
  }

  /**
   * `writer` holds lines it has not formatted yet: they are drained (written through `append`) before
   * the next line written here, when the flush interval ends, on flush and at exit.
   */
  hold(writer: HeldLines): void {
    this.heldBy.add(writer);
    this.arm();
  }

  /** Whole lines (one or several), after any held ones (the held lines' writers call this from `drain`). */
  append(line: string): boolean {
    if (this.broken) return true;
    // Lines always go in whole (Buffer#write would cut them): at worst 3 bytes per UTF-16 unit, and
    // measured exactly only when that worst case would not fit.
    if (this.used + line.length * 3 > this.batchBytes) {
      const bytes = Buffer.byteLength(line);
      if (this.used + bytes > this.batchBytes) {
        this.handOff();
        if (bytes > this.batchBytes) {
          this.enqueue(Buffer.from(line));
          return true;
        }
      }
    }
    if (this.queuedBytes > this.maxPendingBytes) {
      this.dropped += linesIn(line);
      return true;
    }
    if (this.used === 0) this.arm();
    this.used += this.current.write(line, this.used);
    return true;
  }

  /** Calls `done` once every line accepted so far is written (or the destination broke). */
  flush(done: (err?: Error) => void = () => undefined): void {
    this.drainHeld();
    this.handOff();
    if (this.broken || (!this.writing && this.queue.length === 0)) done();
    else this.waiters.push(() => done());
  }

  /** Write everything still held, synchronously (process exit). */
  flushSync(): void {
    this.drainHeld();
    this.handOff();
    // A write in flight is the kernel's or the thread pool's already; what waits behind it goes now.
    const waiting = this.writing ? this.queue.slice(1) : this.queue;
    // A reader that stopped reading (EAGAIN) gets a second at most: an exit must not hang on it.
    const giveUpAt = Date.now() + 1_000;
    for (const chunk of waiting) {
      while (chunk.start < chunk.end && !this.broken) {
        try {
          chunk.start += writeSync(this.fd, chunk.buffer, chunk.start, chunk.end - chunk.start);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EAGAIN' || Date.now() > giveUpAt) this.broken = true;
          else Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
        }
      }
    }
    this.queue.length = this.writing ? 1 : 0;
    holding.delete(this);
  }

  end(): void {
    this.flush();
  }

  /** Held until written: the exit handler writes it, and the flush interval's timer runs. */
  private arm(): void {
    holding.add(this);
    this.timer ??= setTimeout(() => {
      this.timer = null;
      this.drainHeld();
      this.handOff();
    }, this.flushMs).unref();
  }

  private drainHeld(): void {
    for (const writer of this.heldBy) writer.drain();
    this.heldBy.clear();
  }

  /** Queue the batch being filled for writing. */
  private handOff(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.dropped > 0 && this.queuedBytes <= this.maxPendingBytes / 2) {
      const note = `{"level":40,"time":${Date.now()},"dropped":${this.dropped},"msg":"log lines dropped: the log destination could not keep up"}\n`;
      this.dropped = 0;
      this.enqueue(Buffer.from(note));
    }
    if (this.used === 0) return;
    const full = this.current;
    this.enqueue(full.subarray(0, this.used), full);
    this.current = this.spare ?? Buffer.allocUnsafe(this.batchBytes);
    this.spare = null;
    this.used = 0;
  }

  private enqueue(buffer: Buffer, batch: Buffer | null = null): void {
    if (this.broken) return;
    holding.add(this);
    this.queue.push({ buffer, start: 0, end: buffer.length, batch });
    this.queuedBytes += buffer.length;
    this.pump();
  }

  /** One write in flight at a time, in order; partial writes continue, EAGAIN retries. */
  private pump(): void {
    if (this.writing) return;
    const chunk = this.queue[0];
    if (!chunk || this.broken) {
      this.settle();
      return;
    }
    this.writing = true;
    write(this.fd, chunk.buffer, chunk.start, chunk.end - chunk.start, null, (err, written) => {
      this.writing = false;
      if (err) {
        if (err.code === 'EAGAIN') {
          setTimeout(() => this.pump(), RETRY_MS).unref();
          return;
        }
        // EPIPE and the like: nobody reads the log any more; stop logging rather than crash.
        this.broken = true;
        this.queue.length = 0;
        this.queuedBytes = 0;
        this.settle();
        return;
      }
      chunk.start += written;
      if (chunk.start >= chunk.end) {
        this.queue.shift();
        this.queuedBytes -= chunk.end;
        // A batch buffer comes back for reuse (one spare: bounded).
        if (chunk.batch && this.spare === null) this.spare = chunk.batch;
      }
      this.pump();
    });
  }

  private settle(): void {
    if (this.used === 0 && this.queue.length === 0 && this.heldBy.size === 0) holding.delete(this);
    const waiters = this.waiters;
    this.waiters = [];
    for (const done of waiters) done();
  }
}

export function serverLog(level: string, fd = 2): Logger {
  return pino({ level, base: undefined }, new LogDestination(fd));
}

/** Write out what the logger still holds. */
export const flushLog = (log: Logger): Promise<void> => new Promise((done) => log.flush(() => done()));
