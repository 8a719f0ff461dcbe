/**
 * The one HTTP client helper every upstream module uses (characters, Library, souls, the guide's
 * services). It owns the failure rules so each client does not re-invent them:
 *  - every call has a deadline (AbortSignal), combined with the caller's own signal (a visitor who
 *    hung up cancels the upstream request too);
 *  - any upstream failure — timeout, refused/reset connection, unexpected status, a body that is
 *    not the JSON we expect, a body over the size cap — becomes an `UpstreamError`, which *is* the
 *    API's 502 `UPSTREAM` error: if a route lets it escape, the client sees the generic envelope,
 *    never upstream text. The detail goes to the log only;
 *  - streams (SSE) get a deadline for the response head, then an idle timeout between frames
 *    instead of an overall deadline (streams may run for minutes), and bounds on a frame's size
 *    and on the whole stream's size (a hostile upstream cannot make us buffer gigabytes);
 *  - every deadline fires whatever the garbage collector does: once a response head arrived,
 *    cancellation goes to the body's reader directly. (fetch links an abort signal to its request
 *    through a weak reference: after a collection, aborting the signal no longer reaches a pending
 *    body read, which then waits for undici's own 300 s body timeout.)
 */
import { channel } from 'node:diagnostics_channel';
import { createParser, type EventSourceMessage, type EventSourceParser } from 'eventsource-parser';
import type { Logger } from 'pino';
import { causeOf } from '../../common/errors.ts';
import { BodyTooLarge } from '../../common/net.ts';
import { HttpError } from '../errors.ts';

/** Every upstream call and failure, for the metrics (server/operations.ts): `{ upstream, failure? }`. */
export const upstreamEvents = channel('museum.upstream');

export type UpstreamFailure = 'timeout' | 'network' | 'status' | 'body' | 'aborted';

/** An upstream call that failed. Thrown out of a route it answers 502 `UPSTREAM` (generic message). */
export class UpstreamError extends HttpError {
  constructor(
    readonly service: string,
    readonly reason: UpstreamFailure,
    /** For logs only; never sent to clients. */
    readonly detail: string,
    readonly upstreamStatus?: number,
  ) {
    super(502, 'UPSTREAM', `The ${service} is temporarily unavailable`);
  }
}

export interface UpstreamOptions {
  /** Human name used in the 502 message and logs, e.g. "character knowledge base". */
  service: string;
  baseUrl: string;
  /** Deadline of one request/response call (and of the response head of a stream). */
  timeoutMs: number;
  /** Sent with every request (auth headers). */
  headers?: Record<string, string>;
  log?: Logger;
  /** Largest JSON body accepted, in bytes (bounded memory). Default 32 MB. */
  maxBytes?: number;
}

export type QueryValue = string | number | boolean | undefined | null;

export interface CallOptions {
  method?: 'GET' | 'POST';
  query?: Record<string, QueryValue>;
  /** JSON request body. */
  body?: unknown;
  headers?: Record<string, string>;
  /** The caller's cancellation (e.g. the visitor disconnected). */
  signal?: AbortSignal;
  /** Overrides the client's deadline for this call. */
  timeoutMs?: number;
  /** Statuses answered as `{ status, body: null }` instead of failing (e.g. 403/404 = not found). */
  accept?: number[];
}

export interface JsonResult {
  status: number;
  /** Parsed JSON, or null for an accepted non-2xx status. */
  body: unknown;
  /** Size of the response body in bytes (cache accounting). */
  bytes: number;
}

export interface StreamOptions extends Omit<CallOptions, 'accept'> {
  /** End the stream with a timeout failure when nothing arrives for this long. */
  idleMs: number;
  /** Longest frame, in characters: a longer one fails the stream (`body`). Default 2 MiB. */
  maxFrameChars?: number;
  /** Largest whole stream body, in bytes: past it the stream fails (`body`). Default: the client's `maxBytes`. */
  maxTotalBytes?: number;
}

/** What an event stream said: an event (eventsource-parser's message) or a comment line (a heartbeat, say). */
export type SseItem = { message: EventSourceMessage; comment?: undefined } | { comment: string; message?: undefined };

/** An open SSE stream: its events and comments as they arrive; `close()` cancels it. */
export interface SseStream extends AsyncIterable<SseItem> {
  close(): void;
  /** True once the stream was cancelled by `close()` or the caller's signal. */
  readonly cancelled: boolean;
}

const DEFAULT_MAX_BYTES = 32 * 1024 * 1024;
const DEFAULT_MAX_FRAME_CHARS = 2 * 1024 * 1024;

class Deadline extends Error {}

/**
 * What stops a stream: the caller's signal, its idle timer or `close()`. Before the head, aborting
 * fetch's signal is what stops it; after, the reader is cancelled directly (see the module comment:
 * the signal may no longer reach the body).
 */
class StreamControl {
  state: 'open' | 'cancelled' | 'idle' = 'open';
  readonly controller = new AbortController();
  /** The body's reader, once the head arrived. */
  reader: ReadableStreamDefaultReader<Uint8Array> | null = null;
  private readonly caller: AbortSignal | undefined;
  private readonly onCallerAbort = () => this.stop('cancelled');

  constructor(caller: AbortSignal | undefined) {
    this.caller = caller;
    if (caller?.aborted) this.onCallerAbort();
    caller?.addEventListener('abort', this.onCallerAbort, { once: true });
  }

  stop(why: 'cancelled' | 'idle'): void {
    if (this.state !== 'open') return;
    this.state = why;
    if (this.reader) this.reader.cancel().catch(() => undefined);
    else this.controller.abort();
  }

  /** Stop listening to the caller's signal. */
  detach(): void {
    this.caller?.removeEventListener('abort', this.onCallerAbort);
  }
}

export class UpstreamHttp {
  readonly service: string;
  readonly baseUrl: string;
  readonly timeoutMs: number;
  private readonly headers: Record<string, string>;
  private readonly log?: Logger;
  private readonly maxBytes: number;

  constructor(options: UpstreamOptions) {
    this.service = options.service;
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.timeoutMs = options.timeoutMs;
    this.headers = options.headers ?? {};
    this.log = options.log;
    this.maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  }

  /** Absolute URL of an upstream path with query parameters (undefined/null values are left out). */
  url(path: string, query: Record<string, QueryValue> = {}): string {
    const url = new URL(this.baseUrl + (path.startsWith('/') ? path : `/${path}`));
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
    return url.href;
  }

  /** One request/response call whose body must be JSON. */
  async json(path: string, options: CallOptions = {}): Promise<JsonResult> {
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    const { signal, cancel, timedOut } = deadline(timeoutMs, options.signal);
    try {
      const response = await this.send(path, options, signal, timedOut, timeoutMs);
      if (options.accept?.includes(response.status)) {
        await response.body?.cancel().catch(() => undefined);
        return { status: response.status, body: null, bytes: 0 };
      }
      if (response.status < 200 || response.status > 299) {
        await response.body?.cancel().catch(() => undefined);
        throw this.failure('status', `${options.method ?? 'GET'} ${path} answered ${response.status}`, response.status);
      }
      let text: string;
      try {
        text = (await readResponseBody(response, this.maxBytes, signal)).toString('utf8');
      } catch (err) {
        if (err instanceof BodyTooLarge) throw this.failure('body', `${path}: body over ${this.maxBytes} bytes`);
        throw this.failed(err, path, timedOut(), timeoutMs, options.signal);
      }
      try {
        return { status: response.status, body: JSON.parse(text), bytes: Buffer.byteLength(text) };
      } catch {
        throw this.failure('body', `${path}: response is not JSON (${JSON.stringify(text.slice(0, 60))})`);
      }
    } finally {
      cancel();
    }
  }

  /**
   * Open a Server-Sent Events stream. Resolves when the upstream answered 200 with its head (a
   * failure before that throws `UpstreamError`); the frames then arrive through the iterator, with
   * `idleMs` as the longest allowed silence. Errors while iterating are `UpstreamError`s too.
   */
  async stream(path: string, options: StreamOptions): Promise<SseStream> {
    const control = new StreamControl(options.signal);
    const response = await this.openStream(path, options, control);
    const reader = (control.reader = response.body!.getReader());
    const iterator = this.frames(path, reader, control, {
      idleMs: options.idleMs,
      maxFrameChars: options.maxFrameChars ?? DEFAULT_MAX_FRAME_CHARS,
      maxTotalBytes: options.maxTotalBytes ?? this.maxBytes,
    });
    return {
      [Symbol.asyncIterator]: () => iterator,
      close() {
        // Also ends an iterator that has not started: its reader would otherwise never be released.
        control.stop('cancelled');
        void response; // the stream holds its Response for as long as it is open
      },
      get cancelled() {
        return control.state === 'cancelled';
      },
    };
  }

  /** A stream's response, once its head arrived (within the head deadline) and is an event stream with a body. */
  private async openStream(path: string, options: StreamOptions, control: StreamControl): Promise<Response> {
    const headTimeoutMs = options.timeoutMs ?? this.timeoutMs;
    let headTimedOut = false;
    const headTimer = setTimeout(() => {
      headTimedOut = true;
      control.controller.abort();
    }, headTimeoutMs);
    let response: Response;
    try {
      response = await this.send(
        path,
        { ...options, headers: { accept: 'text/event-stream', ...options.headers } },
        control.controller.signal,
        () => headTimedOut,
        headTimeoutMs,
      );
    } catch (err) {
      control.detach();
      throw err;
    } finally {
      clearTimeout(headTimer);
    }
    const refused = this.refusedStream(path, options.method ?? 'POST', response, control.state === 'cancelled');
    if (refused) {
      control.detach();
      await response.body?.cancel().catch(() => undefined);
      throw refused;
    }
    return response;
  }

  /** Why a stream's head is not served on: cancelled meanwhile, not 200 with a body, not an event stream; or null. */
  private refusedStream(path: string, method: string, response: Response, cancelled: boolean): UpstreamError | null {
    if (cancelled) return new UpstreamError(this.service, 'aborted', `${path}: cancelled by the caller`);
    if (response.status !== 200 || !response.body)
      return this.failure('status', `${method} ${path} answered ${response.status}`, response.status);
    const type = response.headers.get('content-type') ?? '';
    if (!/^text\/event-stream\b/i.test(type))
      return this.failure('body', `${method} ${path} answered ${JSON.stringify(type)} instead of an event stream`);
    return null;
  }

  /**
   * The events and comments of a stream's body as they arrive, within its bounds: an idle timer re-armed
   * by every chunk, the size of one pending event and of the whole body. Leaving early cancels the upstream request.
   */
  private async *frames(
    path: string,
    reader: ReadableStreamDefaultReader<Uint8Array>,
    control: StreamControl,
    { idleMs, maxFrameChars, maxTotalBytes }: { idleMs: number; maxFrameChars: number; maxTotalBytes: number },
  ): AsyncGenerator<SseItem> {
    const decoder = new TextDecoder();
    const parser = new SseParser(maxFrameChars);
    const tooLarge = () => this.failure('body', `${path}: SSE frame over ${maxFrameChars} characters`);
    let total = 0;
    let timer: NodeJS.Timeout | undefined;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => control.stop('idle'), idleMs);
    };
    const silent = () => this.failure('timeout', `${path}: stream silent for ${idleMs} ms`);
    try {
      arm();
      for (;;) {
        let chunk: Awaited<ReturnType<typeof reader.read>>;
        try {
          chunk = await reader.read();
        } catch (err) {
          if (control.state === 'cancelled') return;
          throw control.state === 'idle' ? silent() : this.failure('network', `${path}: stream interrupted (${causeOf(err)})`);
        }
        // A cancelled reader reads as the end of the body.
        if (control.state === 'idle') throw silent();
        if (control.state === 'cancelled') return;
        if (chunk.done) break;
        arm();
        total += chunk.value.byteLength;
        if (total > maxTotalBytes) throw this.failure('body', `${path}: stream over ${maxTotalBytes} bytes`);
        yield* parser.take(decoder.decode(chunk.value, { stream: true }));
        if (parser.overflowed) throw tooLarge();
      }
      // A last event without its blank line is kept (the SSE standard drops it; its `done` would be lost).
      yield* parser.take(`${decoder.decode()}\n\n`);
      if (parser.overflowed) throw tooLarge();
    } finally {
      clearTimeout(timer);
      control.detach();
      // Leaving early (consumer stopped, error) cancels the upstream request.
      control.stop('cancelled');
    }
  }

  private async send(
    path: string,
    options: CallOptions,
    signal: AbortSignal,
    timedOut: () => boolean,
    timeoutMs: number,
  ): Promise<Response> {
    const method = options.method ?? (options.body === undefined ? 'GET' : 'POST');
    const headers: Record<string, string> = { accept: 'application/json', ...this.headers, ...options.headers };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    if (upstreamEvents.hasSubscribers) upstreamEvents.publish({ upstream: this.service });
    try {
      return await fetch(this.url(path, options.query), {
        method,
        headers,
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        signal,
        redirect: 'error',
      });
    } catch (err) {
      throw this.failed(err, path, timedOut(), timeoutMs, options.signal);
    }
  }

  private failed(err: unknown, path: string, timedOut: boolean, timeoutMs: number, caller?: AbortSignal): UpstreamError {
    if (err instanceof UpstreamError) return err;
    if (timedOut) return this.failure('timeout', `${path}: no answer within ${timeoutMs} ms`);
    if (caller?.aborted) return new UpstreamError(this.service, 'aborted', `${path}: cancelled by the caller`);
    return this.failure('network', `${path}: ${causeOf(err)}`);
  }

  /** A logged UpstreamError (clients use it for bodies of the wrong shape). */
  failure(reason: UpstreamFailure, detail: string, status?: number): UpstreamError {
    this.log?.warn({ upstream: this.service, reason, detail, status }, 'upstream call failed');
    if (upstreamEvents.hasSubscribers) upstreamEvents.publish({ upstream: this.service, failure: reason });
    return new UpstreamError(this.service, reason, detail, status);
  }
}

/**
 * A response body, at most `maxBytes` (else BodyTooLarge). When `signal` fires the body's reader is
 * cancelled directly and the read fails with the signal's reason: this holds after a garbage
 * collection too, which a signal given to fetch alone does not.
 */
export async function readResponseBody(response: Response, maxBytes: number, signal?: AbortSignal): Promise<Buffer> {
  const declared = Number(response.headers.get('content-length') ?? NaN);
  if (declared > maxBytes) {
    await response.body?.cancel().catch(() => undefined);
    throw new BodyTooLarge(maxBytes);
  }
  if (!response.body) return Buffer.alloc(0);
  const reader = response.body.getReader();
  const cancel = () => reader.cancel().catch(() => undefined);
  if (signal?.aborted) cancel();
  signal?.addEventListener('abort', cancel, { once: true });
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (signal?.aborted) throw signal.reason ?? new Deadline();
      if (done) break;
      total += value.byteLength;
      if (total > maxBytes) throw new BodyTooLarge(maxBytes);
      chunks.push(value);
    }
  } catch (err) {
    cancel();
    throw err;
  } finally {
    signal?.removeEventListener('abort', cancel);
  }
  return Buffer.concat(chunks);
}

/** eventsource-parser fed text by text, its events and comments handed out per text, a pending frame bounded. */
class SseParser {
  private parsed: SseItem[] = [];
  /** A pending frame grew past the bound: the stream is broken. */
  overflowed = false;
  private readonly parser: EventSourceParser;

  constructor(maxFrameChars: number) {
    this.parser = createParser({
      onEvent: (message) => this.parsed.push({ message }),
      onComment: (comment) => this.parsed.push({ comment }),
      onError: (error) => {
        if (error.type === 'max-buffer-size-exceeded') this.overflowed = true;
      },
      maxBufferSize: maxFrameChars,
    });
  }

  /** The items `text` completes (those before a frame over the bound, if one is). */
  take(text: string): SseItem[] {
    this.parser.feed(text);
    const items = this.parsed;
    this.parsed = [];
    return items;
  }
}

/**
 * A signal that fires after `ms` or when the caller's signal fires. Linked by a listener on the
 * caller's signal (a strong reference), not AbortSignal.any, whose result may be collected.
 */
export function deadline(ms: number, caller?: AbortSignal): { signal: AbortSignal; cancel: () => void; timedOut: () => boolean } {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new Deadline());
  }, ms);
  const onCallerAbort = () => controller.abort(caller!.reason);
  if (caller?.aborted) onCallerAbort();
  else caller?.addEventListener('abort', onCallerAbort, { once: true });
  const cancel = () => {
    clearTimeout(timer);
    caller?.removeEventListener('abort', onCallerAbort);
  };
  return { signal: controller.signal, cancel, timedOut: () => timedOut };
}

/** Wait for `promise`, but give up (with the caller's abort) when `signal` fires first. */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined, service: string): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(new UpstreamError(service, 'aborted', 'cancelled by the caller'));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new UpstreamError(service, 'aborted', 'cancelled by the caller'));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

/** An event or comment as SSE text, for relaying it (LF line ends, one item a frame). */
export function formatSse(item: SseItem): string {
  if (item.message === undefined) return `: ${item.comment}\n\n`;
  const { event, id, data } = item.message;
  const head = (event === undefined ? '' : `event: ${event}\n`) + (id === undefined ? '' : `id: ${id}\n`);
  return `${head}data: ${data.split('\n').join('\ndata: ')}\n\n`;
}
