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
 * Write one access line (shared with the raw exchange, which adds `fast: true`). The request id is
 * a token by construction (request-id.ts) and the method one of node's parser's: neither needs JSON
 * escaping; the path may.
 */
export function logAccess(log: Logger, requestId: string, method: string, path: string, status: number, started: number, fast?: true): void {
  if (log.levelVal > INFO) return; // (isLevelEnabled looks the level up by name: measurable per request)
  const fields = `"requestId":"${requestId}","method":"${method}","path":${jsonString(path)},"status":${status},"ms":${milliseconds(performance.now() - started)}`;
  const internals = log as unknown as Record<symbol, unknown>;
  const time = (internals[timeSym] as () => string)();
  (internals[streamSym] as Destination).write(
    `{"level":30${time}${internals[chindingsSym] as string},${fields}${fast ? ',"fast":true' : ''},"msg":"request"}\n`,
  );
}

export function accessLog(log: Logger): MuseumMiddleware {
  return async function accessLogMiddleware(ctx, next) {
    try {
      await next();
    } finally {
      logAccess(log, ctx.state.requestId, ctx.method, ctx.path, ctx.status, startedAt(ctx.res));
    }
  };
}
