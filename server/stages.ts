/**
 * The request path, in one order, for every request (`requestHandler` is the node server's only
 * request handler):
 *
 *   connection guard → request id + client IP → access line + metrics (once answered) → answer writer
 *   → route match (+ the path's declared headers) → CORS (preflights from the table) → compression
 *   → error envelope → dispatch: 404 / 405, or the route's own stages — auth + key limit or IP limit
 *   → body → validation → handler
 *
 * Each stage is a small set of hooks in its own file (types.ts `Stage`, as fastify's hooks): `request`
 * on the way in, in this order, until one finishes the exchange; `answer` on the way out, in reverse;
 * `error` (the envelope) for what a later stage threw. The route's own stages are listed once per
 * declaration by the route table (server/route-table.ts). The answer writer writes, on the way out,
 * the answer the stages after it built (exchange.ts), so the access line's hook (before it) sees it
 * written. A hook waits only when it returns a promise: an answer from memory passes every stage
 * without one (an onion of async middleware cost ~2 µs a request: bench/RESULTS.md).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { Exchange, respond } from './exchange.ts';
import { compressAnswers } from './middleware/compress.ts';
import { cors } from './middleware/cors.ts';
import { errorEnvelope, sendErrorAndClose } from './middleware/errors.ts';
import { connectionGuard } from './middleware/guard.ts';
import { observe, type RequestObserver } from './middleware/observe.ts';
import { requestContext } from './middleware/request-id.ts';
import type { RouteTable } from './route-table.ts';
import type { Stage } from './types.ts';

export interface StageDeps {
  table: RouteTable;
  log: Logger;
  trustProxy: boolean;
  /** Requests in flight, metrics, and whether the server is draining for a shutdown. */
  operations: RequestObserver & { readonly draining: boolean };
}

export function stages({ table, log, trustProxy, operations }: StageDeps): Stage[] {
  return [
    connectionGuard(operations),
    requestContext({ trustProxy }),
    observe(log, operations),
    answerWriter(log),
    table.match(),
    cors(),
    compressAnswers(),
    errorEnvelope(log),
    table.dispatch(),
  ];
}

/** Errors of a client that went away mid-answer: normal (aborted downloads, closed event streams). */
const CLIENT_GONE = new Set(['ERR_STREAM_PREMATURE_CLOSE', 'ECONNRESET', 'EPIPE', 'ERR_STREAM_DESTROYED', 'ERR_STREAM_WRITE_AFTER_END']);

/** Writes, on the way out, the answer the stages after it built (exchange.ts `respond`). */
function answerWriter(log: Logger): Stage {
  const streamFailed = (err: NodeJS.ErrnoException) => {
    if (!CLIENT_GONE.has(err.code ?? '')) log.error({ err }, 'answer stream failed');
  };
  return { answer: (ex) => respond(ex, streamFailed) };
}

/** The node server's request handler: each request an exchange through `list` (which writes its answer). */
export function requestHandler(list: Stage[], log: Logger): (req: IncomingMessage, res: ServerResponse) => void {
  const path = new StagePath(list, log);
  return (req, res) => {
    const pending = path.run(new Exchange(req, res));
    if (pending !== undefined) pending.catch((err: unknown) => log.error({ err }, 'request path failed'));
  };
}

/** Runs the stages' hooks over an exchange: synchronously as long as no hook returns a promise. */
class StagePath {
  // Each kind of hook in its own array, by stage: a call site then reads one array, whatever the
  // stages' shapes (reading `stage.request` across nine differently shaped stages is a megamorphic load).
  private readonly requests: Array<Stage['request']>;
  private readonly answers: Array<Stage['answer']>;
  private readonly errors: Array<Stage['error']>;

  constructor(
    list: readonly Stage[],
    private readonly log: Logger,
  ) {
    this.requests = list.map((stage) => stage.request?.bind(stage));
    this.answers = list.map((stage) => stage.answer?.bind(stage));
    this.errors = list.map((stage) => stage.error?.bind(stage));
  }

  run(ex: Exchange): void | Promise<void> {
    return this.inward(ex, 0);
  }

  /** `request` hooks from `from` on, until one finishes the exchange or none is left; then outward. */
  private inward(ex: Exchange, from: number): void | Promise<void> {
    const { requests } = this;
    let i = from;
    try {
      for (; i < requests.length; i++) {
        const pending = requests[i]?.(ex);
        if (pending !== undefined) {
          const at = i;
          return pending.then(
            () => (ex.finished ? this.outward(ex, at) : this.inward(ex, at + 1)),
            (err: unknown) => this.failed(ex, at, err),
          );
        }
        if (ex.finished) return this.outward(ex, i);
      }
    } catch (err) {
      return this.failed(ex, i, err);
    }
    return this.outward(ex, requests.length - 1);
  }

  /** What stage `at` threw goes to the nearest stage before it with an `error` hook (else: a defect), then outward from there. */
  private failed(ex: Exchange, at: number, err: unknown): void | Promise<void> {
    let handler = at - 1;
    while (handler >= 0 && this.errors[handler] === undefined) handler--;
    if (handler >= 0) this.errors[handler]!(ex, err);
    else this.defect(ex, err);
    return this.outward(ex, handler >= 0 ? handler : at - 1);
  }

  /** `answer` hooks from `from` down to the first stage; one that fails is a defect, and the rest still run. */
  private outward(ex: Exchange, from: number): void | Promise<void> {
    for (let i = from; i >= 0; i--) {
      let pending: void | Promise<void>;
      try {
        pending = this.answers[i]?.(ex);
      } catch (err) {
        this.defect(ex, err);
        continue;
      }
      if (pending !== undefined) {
        const next = i - 1;
        return pending.then(
          () => this.outward(ex, next),
          (err: unknown) => {
            this.defect(ex, err);
            return this.outward(ex, next);
          },
        );
      }
    }
  }

  /** A stage failed outside the error envelope: logged; the client gets a 500 if nothing is sent yet. */
  private defect(ex: Exchange, err: unknown): void {
    this.log.error({ err, requestId: ex.state.requestId }, 'request path failed');
    if (ex.res.headersSent) ex.res.destroy();
    else {
      ex.respond = false;
      sendErrorAndClose(ex.res, 500, 'Internal server error');
    }
  }
}
