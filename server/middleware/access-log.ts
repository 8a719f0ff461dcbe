/**
 * Structured access log: one JSON line per request with id, method, path, status and duration —
 * the line pino writes for `log.info({ requestId, method, path, status, ms }, 'request')`, built
 * directly (it is written for every request, so it skips pino's generic serializer) and written to
 * the logger's own destination, with the logger's level, time and bindings.
 */
import pino, { type Logger } from 'pino';
import { LogDestination } from '../log.ts';
import { startedAt } from '../request-metrics.ts';
import type { MuseumMiddleware } from '../types.ts';

const { streamSym, timeSym, chindingsSym } = pino.symbols;
const INFO = pino.levels.values.info!;
/** Characters that make a string need JSON escaping. */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\u007f-\uffff]/;
const jsonString = (s: string): string => (NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`);
/** Requests whose lines are formatted together (see AccessLog). */
const BATCH = 256;
/**
 * Lines handed to the destination as one string: one copy into its buffer for 32 lines instead of
 * one per line (a Buffer#write crosses into C++; 32 lines at once cost ~90 ns a line less in a loop).
 */
const LINES_PER_APPEND = 32;

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
 * The access-line writer of one logger, shared by the Koa middleware and the raw exchange (which
 * adds `fast: true`). pino's destination and time function are looked up once, not per request;
 * pino's default time (epoch milliseconds) is written inline. The level is read per request and the
 * bindings as lines are formatted, so a level change or `setBindings` still applies.
 *
 * With the server's own destination (LogDestination) and pino's default time, a request leaves a
 * record of its fields and the lines are formatted BATCH at a time: formatting in one loop costs a
 * server answering slots ~4 % less CPU than a line per request interleaved with its HTTP work (A/B,
 * bench/RESULTS.md). The destination drains the records before it writes any other line and before
 * it writes to disk (its timer, flush, exit), so lines keep their order and their times (each
 * record's own clock reading) and nothing waits longer than the destination's flush interval.
 */
export class AccessLog {
  private readonly destination: Destination;
  /** The logger's time function, or null for pino's default (written inline). */
  private readonly time: (() => string) | null;
  /** The destination that drains held records, or null: each line is written as it comes. */
  private readonly batching: LogDestination | null;
  // The held records, field by field (no object per request).
  private readonly ids: Array<string | undefined> = new Array<string | undefined>(BATCH);
  private readonly methods: Array<string | undefined> = new Array<string | undefined>(BATCH);
  private readonly paths: Array<string | undefined> = new Array<string | undefined>(BATCH);
  private readonly statuses = new Uint16Array(BATCH);
  private readonly durations = new Float64Array(BATCH);
  /** performance.now() when each line was logged (its `time`, on the wall clock when formatted). */
  private readonly loggedAt = new Float64Array(BATCH);
  private readonly fast = new Uint8Array(BATCH);
  private held = 0;

  constructor(readonly log: Logger) {
    const internals = log as unknown as Record<symbol, unknown>;
    this.destination = internals[streamSym] as Destination;
    const time = internals[timeSym] as () => string;
    this.time = time === pino.stdTimeFunctions.epochTime ? null : time;
    this.batching = this.time === null && this.destination instanceof LogDestination ? this.destination : null;
  }

  /**
   * The request id is a token by construction (request-id.ts) and the method one of node's
   * parser's: neither needs JSON escaping; the path may.
   */
  write(requestId: string, method: string, path: string, status: number, started: number, fast?: true): void {
    if (this.log.levelVal > INFO) return; // (isLevelEnabled looks the level up by name: measurable per request)
    const now = performance.now();
    if (this.batching === null) {
      const time = this.time === null ? `,"time":${Date.now()}` : this.time();
      this.destination.write(this.line(time, this.bindings(), requestId, method, path, status, now - started, fast === true));
      return;
    }
    const at = this.held++;
    this.ids[at] = requestId;
    this.methods[at] = method;
    this.paths[at] = path;
    this.statuses[at] = status;
    this.durations[at] = now - started;
    this.loggedAt[at] = now;
    this.fast[at] = fast ? 1 : 0;
    if (at === 0) this.batching.hold(this);
    else if (this.held === BATCH) this.drain();
  }

  /** Write the held records' lines, in order (the destination calls this; see the class comment). */
  drain(): void {
    const count = this.held;
    if (count === 0) return;
    this.held = 0;
    // Each record's wall-clock time from its own monotonic reading: one Date.now() per batch.
    const epochOffset = Date.now() - performance.now();
    const bindings = this.bindings();
    let lines = '';
    // Many lines share a millisecond under load: their `time` is formatted once (an epoch
    // millisecond is a double, whose formatting costs more than the rest of the line's numbers).
    let timeMs = -1;
    let time = '';
    for (let i = 0; i < count; i++) {
      const ms = Math.round(epochOffset + this.loggedAt[i]!);
      if (ms !== timeMs) {
        timeMs = ms;
        time = `,"time":${ms}`;
      }
      lines += this.line(time, bindings, this.ids[i]!, this.methods[i]!, this.paths[i]!, this.statuses[i]!, this.durations[i]!, this.fast[i] === 1);
      this.ids[i] = this.methods[i] = this.paths[i] = undefined;
      if ((i + 1) % LINES_PER_APPEND === 0 || i + 1 === count) {
        this.batching!.append(lines);
        lines = '';
      }
    }
  }

  /** The logger's bindings as pino writes them (`,"pid":…`), read when lines are formatted. */
  private bindings(): string {
    return (this.log as unknown as Record<symbol, string>)[chindingsSym]!;
  }

  private line(time: string, bindings: string, requestId: string, method: string, path: string, status: number, ms: number, fast: boolean): string {
    return `{"level":30${time}${bindings},"requestId":"${requestId}","method":"${method}","path":${jsonString(path)},"status":${status},"ms":${milliseconds(ms)}${fast ? ',"fast":true' : ''},"msg":"request"}\n`;
  }
}

export function accessLog(access: AccessLog): MuseumMiddleware {
  return async function accessLogMiddleware(ctx, next) {
    try {
      await next();
    } finally {
      access.write(ctx.state.requestId, ctx.method, ctx.path, ctx.status, startedAt(ctx.res));
    }
  };
}
