/**
 * Structured access log: one JSON line per request with id, method, path, status and duration —
 * the line pino writes for `log.info({ requestId, method, path, status, ms }, 'request')`, built
 * directly (it is written for every request, so it skips pino's generic serializer) and written to
 * the logger's own destination, with the logger's level, time and bindings.
 */
import pino, { type Logger } from 'pino';
import { startedAt } from '../request-metrics.ts';
import type { MuseumMiddleware } from '../types.ts';

const { streamSym, timeSym, chindingsSym } = pino.symbols;
const INFO = pino.levels.values.info!;
/** Characters that make a string need JSON escaping. */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\u007f-\uffff]/;
const jsonString = (s: string): string => (NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`);

interface Destination {
  write(line: string): unknown;
}

/** Milliseconds with two decimals, as a JSON number (integer formatting: a third of the cost of a double's). */
function milliseconds(ms: number): string {
  const hundredths = Math.round(ms * 100);
  const fraction = hundredths % 100;
  return `${(hundredths - fraction) / 100}.${fraction < 10 ? '0' : ''}${fraction}`;
}

/**
 * The access-line writer of one logger (shared by the Koa middleware and the raw exchange, which
 * adds `fast: true`). pino's destination and time function are looked up once, not per request;
 * pino's default time (epoch milliseconds) is written inline. The level and the bindings are read
 * per line, so a level change or `setBindings` still applies.
 */
export class AccessLog {
  private readonly destination: Destination;
  /** The logger's time function, or null for pino's default (written inline). */
  private readonly time: (() => string) | null;

  constructor(readonly log: Logger) {
    const internals = log as unknown as Record<symbol, unknown>;
    this.destination = internals[streamSym] as Destination;
    const time = internals[timeSym] as () => string;
    this.time = time === pino.stdTimeFunctions.epochTime ? null : time;
  }

  /**
   * The request id is a token by construction (request-id.ts) and the method one of node's
   * parser's: neither needs JSON escaping; the path may.
   */
  write(requestId: string, method: string, path: string, status: number, started: number, fast?: true): void {
    if (this.log.levelVal > INFO) return; // (isLevelEnabled looks the level up by name: measurable per request)
    const ms = milliseconds(performance.now() - started);
    const time = this.time === null ? `,"time":${Date.now()}` : this.time();
    const bindings = (this.log as unknown as Record<symbol, string>)[chindingsSym];
    this.destination.write(
      `{"level":30${time}${bindings},"requestId":"${requestId}","method":"${method}","path":${jsonString(path)},"status":${status},"ms":${ms}${fast ? ',"fast":true' : ''},"msg":"request"}\n`,
    );
  }
}

export function accessLog(log: Logger): MuseumMiddleware {
  const access = new AccessLog(log);
  return async function accessLogMiddleware(ctx, next) {
    try {
      await next();
    } finally {
      access.write(ctx.state.requestId, ctx.method, ctx.path, ctx.status, startedAt(ctx.res));
    }
  };
}
