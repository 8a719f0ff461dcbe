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
 *    instead of an overall deadline (streams may run for minutes).
 */
import type { Logger } from 'pino';
import { HttpError } from '../errors.ts';

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
}

/** An open SSE stream: raw frames (each ending with a blank line) as they arrive; `close()` cancels it. */
export interface SseStream extends AsyncIterable<string> {
  close(): void;
  /** True once the stream was cancelled by `close()` or the caller's signal. */
  readonly cancelled: boolean;
}

const DEFAULT_MAX_BYTES = 32 * 1024 * 1024;

class Deadline extends Error {}

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
        text = await readText(response, this.maxBytes);
      } catch (err) {
        if (err instanceof TooLarge) throw this.failure('body', `${path}: body over ${this.maxBytes} bytes`);
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
    const headTimeoutMs = options.timeoutMs ?? this.timeoutMs;
    const controller = new AbortController();
    let cancelled = false;
    let idle = false;
    const onCallerAbort = () => {
      cancelled = true;
      controller.abort();
    };
    if (options.signal?.aborted) onCallerAbort();
    options.signal?.addEventListener('abort', onCallerAbort, { once: true });
    const detach = () => options.signal?.removeEventListener('abort', onCallerAbort);
    let headTimedOut = false;
    const headTimer = setTimeout(() => {
      headTimedOut = true;
      controller.abort();
    }, headTimeoutMs);
    let response: Response;
    try {
      response = await this.send(path, { ...options, headers: { accept: 'text/event-stream', ...options.headers } }, controller.signal, () => headTimedOut, headTimeoutMs);
    } catch (err) {
      detach();
      throw err;
    } finally {
      clearTimeout(headTimer);
    }
    if (response.status !== 200 || !response.body) {
      detach();
      await response.body?.cancel().catch(() => undefined);
      throw this.failure('status', `${options.method ?? 'POST'} ${path} answered ${response.status}`, response.status);
    }
    const type = response.headers.get('content-type') ?? '';
    if (!/^text\/event-stream\b/i.test(type)) {
      detach();
      await response.body.cancel().catch(() => undefined);
      throw this.failure('body', `${options.method ?? 'POST'} ${path} answered ${JSON.stringify(type)} instead of an event stream`);
    }
    const body = response.body;
    const self = this;
    async function* frames(): AsyncGenerator<string> {
      const reader = body.getReader();
      const decoder = new TextDecoder();
      let buffer = '';
      let carriageReturn = false; // a chunk ended in \r: it may be the first half of \r\n
      let timer: NodeJS.Timeout | undefined;
      const arm = () => {
        clearTimeout(timer);
        timer = setTimeout(() => {
          idle = true;
          controller.abort();
        }, options.idleMs);
      };
      try {
        arm();
        for (;;) {
          let chunk: Awaited<ReturnType<typeof reader.read>>;
          try {
            chunk = await reader.read();
          } catch (err) {
            if (cancelled) return;
            throw idle
              ? self.failure('timeout', `${path}: stream silent for ${options.idleMs} ms`)
              : self.failure('network', `${path}: stream interrupted (${causeOf(err)})`);
          }
          if (chunk.done) break;
          arm();
          // SSE allows CR, LF and CRLF line ends; frames are passed on with LF only.
          let text = decoder.decode(chunk.value, { stream: true });
          if (carriageReturn) text = `\r${text}`;
          carriageReturn = text.endsWith('\r');
          if (carriageReturn) text = text.slice(0, -1);
          buffer += text.replace(/\r\n?/g, '\n');
          let end: number;
          while ((end = buffer.indexOf('\n\n')) !== -1) {
            const frame = buffer.slice(0, end + 2);
            buffer = buffer.slice(end + 2);
            if (frame.trim() !== '') yield frame;
          }
          if (buffer.length > self.maxBytes) throw self.failure('body', `${path}: SSE frame over ${self.maxBytes} bytes`);
        }
        const rest = (buffer + decoder.decode() + (carriageReturn ? '\n' : '')).trim();
        if (rest !== '') yield `${rest}\n\n`;
      } finally {
        clearTimeout(timer);
        detach();
        // Leaving early (consumer stopped, error) cancels the upstream request.
        if (!controller.signal.aborted) {
          reader.cancel().catch(() => undefined);
          controller.abort();
        }
      }
    }
    const iterator = frames();
    return {
      [Symbol.asyncIterator]: () => iterator,
      close() {
        if (controller.signal.aborted) return;
        cancelled = true;
        controller.abort();
      },
      get cancelled() {
        return cancelled;
      },
    };
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
    return new UpstreamError(this.service, reason, detail, status);
  }
}

class TooLarge extends Error {}

async function readText(response: Response, maxBytes: number): Promise<string> {
  const declared = Number(response.headers.get('content-length') ?? NaN);
  if (declared > maxBytes) {
    await response.body?.cancel().catch(() => undefined);
    throw new TooLarge();
  }
  if (!response.body) return '';
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of response.body) {
    total += chunk.byteLength;
    if (total > maxBytes) throw new TooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** A signal that fires after `ms` or when the caller's signal fires. */
function deadline(ms: number, caller?: AbortSignal): { signal: AbortSignal; cancel: () => void; timedOut: () => boolean } {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new Deadline());
  }, ms);
  const signal = caller ? AbortSignal.any([controller.signal, caller]) : controller.signal;
  return { signal, cancel: () => clearTimeout(timer), timedOut: () => timedOut };
}

function causeOf(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
  return cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err)).split('\n')[0]!;
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

/** Parse one SSE frame: its `data:` payload as JSON (undefined for comments / non-JSON) and comment lines. */
export function parseSseFrame(frame: string): { data?: unknown; comment?: string; event?: string } {
  const data: string[] = [];
  let comment: string | undefined;
  let event: string | undefined;
  for (const line of frame.split('\n')) {
    if (line.startsWith(':')) comment = line.slice(1).trim();
    else if (line.startsWith('data:')) data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
    else if (line.startsWith('event:')) event = line.slice(6).trim();
  }
  if (data.length === 0) return { comment, event };
  try {
    return { data: JSON.parse(data.join('\n')), comment, event };
  } catch {
    return { comment, event };
  }
}
