/**
 * One request's passage through the stages (server/stages.ts): the request, what the stages learn
 * about it (`state`), and the answer they build — status, headers, body — which `respond` writes
 * once they are done, with one `writeHead` (or leaves alone when a stage took the response over:
 * an event stream, a refused connection).
 *
 * Why not a Koa context: Koa's per-request machinery (its three context objects, on-finished, its
 * header setters and `respond`) costs more than the whole spec floor's work (bench/RESULTS.md,
 * "Serve"); the stages need only this much of it. The names follow Koa's (`status`, `body`, `set`,
 * `get`, `state`, `respond`), so a stage reads as a Koa middleware does.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { pipeline, Readable } from 'node:stream';
import typeIs from 'type-is';
import { JSON_TYPE } from './http-conditional.ts';
import type { Headers, MuseumState, RawAnswer } from './types.ts';

/** What an answer's body may be: bytes, text, a stream, a JSON value, or nothing. */
export type Body = Buffer | string | Readable | object | null;

const NO_PARAMS: Record<string, string> = Object.freeze({}) as Record<string, string>;
/** Statuses that never carry a body (RFC 9110). */
const EMPTY_STATUS = new Set([204, 205, 304]);
const BODY_HEADERS = ['Content-Type', 'Content-Length', 'Transfer-Encoding'];

export class Exchange {
  readonly state: MuseumState;
  /** The request path as sent (not percent-decoded), without its query. */
  readonly path: string;
  /** The query string, without its `?`. */
  readonly querystring: string;
  /** When the exchange began (performance.now()). */
  readonly started = performance.now();
  /** The path's parameters as sent (percent-decoded), set by the route match. */
  params: Record<string, string> = NO_PARAMS;
  /** false: a stage has answered on the response itself (event streams, refused connections); nothing is written. */
  respond = true;
  /** A stage has decided the answer on the way in (a preflight, a refused connection): no later stage's `request` runs. */
  finished = false;
  private answerStatus = 404;
  private statusSet = false;
  private answerBody: Body = null;
  /**
   * The answer's headers as node's flat [name, value, …] list, what `writeHead` takes with the least
   * work. An answer has about ten, so a name is found by scanning (names are set in their canonical
   * case, 'Content-Type', 'ETag', as everywhere in the server; a case-folding map cost ~0.7 µs a request).
   */
  private readonly list: string[] = [];

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
  ) {
    const url = req.url ?? '/';
    const at = url.indexOf('?');
    this.path = pathOf(at < 0 ? url : url.slice(0, at));
    this.querystring = at < 0 ? '' : url.slice(at + 1);
    // Every field from the start: one object shape for every request.
    this.state = { requestId: '', clientIp: '', keyId: undefined, body: undefined, match: undefined, route: undefined };
  }

  get method(): string {
    return this.req.method ?? 'GET';
  }

  get url(): string {
    return this.req.url ?? '/';
  }

  /** The request's headers. */
  get headers(): IncomingHttpHeaders {
    return this.req.headers;
  }

  /** A request header's value ('' when absent; repeated ones joined). */
  get(name: string): string {
    const value = this.req.headers[name.toLowerCase()];
    return value === undefined ? '' : Array.isArray(value) ? value.join(', ') : value;
  }

  /** The request's query parameter `name` (its first value), or null. */
  queryParam(name: string): string | null {
    return this.querystring === '' ? null : new URLSearchParams(this.querystring).get(name);
  }

  /** The request body's media type is one of `types` (type-is, as Koa's `ctx.is`). */
  is(...types: string[]): boolean {
    return typeof typeIs(this.req, types) === 'string';
  }

  get status(): number {
    return this.answerStatus;
  }

  set status(status: number) {
    this.answerStatus = status;
    this.statusSet = true;
  }

  get body(): Body {
    return this.answerBody;
  }

  /** Setting a body makes the answer a 200 unless a status was set (as in Koa). */
  set body(body: Body) {
    this.answerBody = body;
    if (!this.statusSet && body !== null) this.answerStatus = 200;
  }

  /** The answer's media type (`Content-Type`, set as given). */
  set type(type: string) {
    this.set('Content-Type', type);
  }

  /** Set an answer header, or several (a header object). */
  set(name: string | Headers, value?: string): void {
    if (typeof name === 'string') this.put(name, value!);
    else for (const key in name) this.put(key, name[key]!);
  }

  private put(name: string, value: string): void {
    const at = this.indexOf(name);
    if (at < 0) this.list.push(name, value);
    else this.list[at + 1] = value;
  }

  /** Where `name` is in the list, or -1. */
  private indexOf(name: string): number {
    const { list } = this;
    for (let i = 0; i < list.length; i += 2) if (list[i] === name) return i;
    return -1;
  }

  /** An answer header's value (by its canonical name), or undefined. */
  answerHeader(name: string): string | undefined {
    const at = this.indexOf(name);
    return at < 0 ? undefined : this.list[at + 1];
  }

  remove(name: string): void {
    const at = this.indexOf(name);
    if (at >= 0) this.list.splice(at, 2);
  }

  /** Add `field` to the answer's `Vary`. */
  vary(field: string): void {
    const current = this.answerHeader('Vary');
    if (current === undefined) this.set('Vary', field);
    else if (!current.split(/\s*,\s*/).some((f) => f.toLowerCase() === field.toLowerCase())) this.set('Vary', `${current}, ${field}`);
  }

  /** A whole answer: its status, headers and body. */
  answer(answer: RawAnswer): void {
    this.status = answer.status;
    this.set(answer.headers);
    if (answer.body !== null) this.body = answer.body;
  }

  /** Hand the status and headers to node (they leave with the first write): a stage that writes the body itself. */
  writeHead(): void {
    this.res.writeHead(this.answerStatus, this.list);
  }

  /** Send the status and headers now (an event stream): the stage then writes the body itself. */
  flushHeaders(): void {
    this.writeHead();
    this.res.flushHeaders();
  }
}

/** The path of a request target: origin form as it is; absolute form (`http://host/p`) by its path. */
function pathOf(target: string): string {
  if (target.startsWith('/')) return target;
  try {
    return new URL(target).pathname;
  } catch {
    return target;
  }
}

/**
 * Write the exchange's answer (after the stages): one `writeHead` and the body — bytes, text or JSON
 * with their length, a stream piped (destroyed with the response if either fails), nothing for HEAD
 * or an empty status. Nothing when a stage took the response over or it is already sent.
 */
export function respond(ex: Exchange, onStreamError: (err: Error) => void): void {
  const { res } = ex;
  if (!ex.respond || res.headersSent || res.writableEnded || res.destroyed) return;
  const status = ex.status;
  const body = EMPTY_STATUS.has(status) ? null : bytesOrStream(ex);
  if (body === null) {
    if (EMPTY_STATUS.has(status)) for (const name of BODY_HEADERS) if (ex.answerHeader(name) !== undefined) ex.remove(name);
    ex.writeHead();
    res.end();
    return;
  }
  ex.answerHeader('Content-Type') ?? ex.set('Content-Type', 'application/octet-stream');
  if (Buffer.isBuffer(body)) {
    if (ex.answerHeader('Content-Length') === undefined) ex.set('Content-Length', String(body.length));
    ex.writeHead();
    res.end(ex.method === 'HEAD' ? undefined : body);
    return;
  }
  ex.writeHead();
  if (ex.method === 'HEAD') {
    body.destroy();
    res.end();
    return;
  }
  pipeline(body, res, (err) => {
    if (err) onStreamError(err);
  });
}

/** The body as bytes (text and JSON values serialized, with their type when none is set) or a stream; null for none. */
function bytesOrStream(ex: Exchange): Buffer | Readable | null {
  const body = ex.body;
  if (body === null || Buffer.isBuffer(body) || body instanceof Readable) return body;
  if (typeof body === 'string') {
    ex.answerHeader('Content-Type') ?? ex.set('Content-Type', 'text/plain; charset=utf-8');
    return Buffer.from(body);
  }
  ex.answerHeader('Content-Type') ?? ex.set('Content-Type', JSON_TYPE);
  return Buffer.from(JSON.stringify(body));
}
