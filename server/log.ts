/**
 * The server's logger as shipped: pino JSON lines on stderr through pino's asynchronous destination
 * (sonic-boom), which holds lines until `minLength` bytes are waiting (or `flushMs` passed) and writes
 * them in one `write(2)`: under load a write carries a few hundred lines, and when traffic is light
 * lines still leave within `flushMs`.
 *
 * Bounded: past `maxLength` bytes waiting for a reader that cannot keep up (a stalled pipe), lines
 * are dropped and counted, and one line saying how many is written once the reader catches up. A
 * reader that goes away (EPIPE) stops the logging, not the process. `flushLog` (the last step of the
 * server's shutdown) resolves once every accepted line is written; pino writes what is still held
 * when the process exits.
 */
import pino, { type DestinationStream, type Logger } from 'pino';

export interface LogDestinationOptions {
  /** Bytes held before a write (sonic-boom allows up to 16 KB). */
  minLength?: number;
  /** Longest a line waits for a write when traffic is light. */
  flushMs?: number;
  /** Bytes waiting for the reader at most; more are dropped and counted. */
  maxLength?: number;
}

/** What the museum's log and the bench's rivals write through (bench/serve-rivals.ts uses the same). */
export const LOG_DESTINATION = { sync: false, minLength: 12 * 1024, periodicFlush: 500, maxLength: 64 * 1024 * 1024 } as const;

/**
 * pino's asynchronous destination on `fd`, with the museum's settings, its drops counted and told.
 * @public (test/server/log.test.ts imports it by path in a child process, where knip cannot see it)
 */
export function logDestination(fd: number, options: LogDestinationOptions = {}): DestinationStream {
  const destination = pino.destination({
    ...LOG_DESTINATION,
    dest: fd,
    ...(options.minLength !== undefined && { minLength: options.minLength }),
    ...(options.flushMs !== undefined && { periodicFlush: options.flushMs }),
    ...(options.maxLength !== undefined && { maxLength: options.maxLength }),
  });
  let dropped = 0;
  destination.on('drop', (data: string) => {
    dropped += Math.max(data.split('\n').length - 1, 1);
  });
  destination.on('write', () => {
    if (dropped === 0) return;
    const count = dropped;
    dropped = 0;
    destination.write(
      `{"level":40,"time":${Date.now()},"dropped":${count},"msg":"log lines dropped: the log destination could not keep up"}\n`,
    );
    // Still no room (the drop event fires within write): the note waits for the next write.
    if (dropped > 0) dropped = count;
  });
  // pino's destination stops writing on EPIPE (nobody reads the log any more); any other write
  // error loses those lines, never the process.
  destination.on('error', () => undefined);
  return destination;
}

export function serverLog(level: string, fd = 2, options?: LogDestinationOptions): Logger {
  return pino({ level, base: undefined }, logDestination(fd, options));
}

/**
 * Write out what the logger still holds. Twice: sonic-boom's flush calls back once what is left is
 * under `minLength` (its drain), and the second writes that rest.
 */
export const flushLog = (log: Logger): Promise<void> => new Promise((done) => log.flush(() => log.flush(() => done())));
