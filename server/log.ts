/**
 * The server's logger as shipped: pino JSON lines on stderr, buffered and written asynchronously —
 * a request's access line is appended to a buffer that leaves in one write once it holds
 * `BATCH_BYTES` (or every `FLUSH_MS` when traffic is light), so logging costs no system call per
 * request. What is still buffered is written by `flushLog` (the last step of the server's shutdown
 * sequence) and, whatever ends the process, synchronously when it exits.
 */
import pino, { type Logger } from 'pino';

const BATCH_BYTES = 8 * 1024;
const FLUSH_MS = 500;

export function serverLog(level: string): Logger {
  return pino({ level, base: undefined }, pino.destination({ dest: 2, sync: false, minLength: BATCH_BYTES, periodicFlush: FLUSH_MS }));
}

/** Write out what the logger still buffers. */
export const flushLog = (log: Logger): Promise<void> => new Promise((done) => log.flush(() => done()));
