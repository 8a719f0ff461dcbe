/** A real pino logger whose JSON lines a test can read back (e.g. to see which layer served a request). */
import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';

export function capturedLogger(level: pino.Level = 'info'): { log: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { log: pino({ level }, sink), lines };
}
