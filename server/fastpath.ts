/**
 * The fast path: the route table's raw node:http side. `Api` compiles every route a declaration says
 * is served from memory (the immutable content snapshot, the artifact files, a fresh upstream cache)
 * into this matcher, from the same path pattern and the same zod schemas as its Koa route, so a hit
 * costs a URL lookup, the key check and limit when keyed, and one write — no Koa context, no
 * middleware chain. Everything else reaches Koa untouched, before any key is checked or counted:
 * other methods (OPTIONS preflights, 405s), encoded or unusual URLs, input the schemas reject (Koa
 * answers those 404s and 400s), and input the route's fast read declines (e.g. an image transform).
 *
 * What it writes around an answer — request id, CORS, the envelope, the access line — is the raw
 * exchange (middleware/raw-exchange.ts), built from the same functions as the Koa middleware.
 */
import type { IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import { LruMap } from '../common/lru.ts';
import { HttpError } from './errors.ts';
import { JSON_TYPE } from './http-conditional.ts';
import { authenticate, presentedKey } from './middleware/auth.ts';
import { CORS_LIST } from './middleware/cors.ts';
import { type HeaderList, RawExchange } from './middleware/raw-exchange.ts';
import { hitKeyLimit, KEY_LIMIT, keyLimitExceeded, type RateDecision, type RateLimitStore } from './middleware/rate-limit.ts';
import { labelRoute } from './request-metrics.ts';
import type { KeyStore } from './state/keys.ts';
import type { FastPathHandler, Headers, RawAnswer } from './types.ts';

/** A pre-serialized JSON body (200, application/json), or a whole answer (possibly still loading). */
export type FastAnswer = Buffer | RawAnswer | Promise<RawAnswer>;

/**
 * A route's read from memory: for validated input, the function that produces its answer (it may
 * throw an HttpError, e.g. a 404) — called once the key is checked and counted — or undefined when
 * this input is not answered from memory (then the route's Koa handler answers it).
 */
export type FastRead<I> = (input: I, req: IncomingMessage) => (() => FastAnswer) | undefined;

/** One GET route of the table as the fast path sees it. */
export interface FastRoute {
  /** OpenAPI-style path, e.g. `/v1/rooms/{id}/slots`. */
  path: string;
  access: 'key' | 'public';
  /** Headers on every answer of the route, errors included, as a flat list. */
  headers: HeaderList;
  /** The validated input for raw path parameters and a raw query string; undefined: invalid. */
  input(params: Record<string, string>, search: string): unknown;
  /** Absent: the route is Koa's alone. */
  read?: FastRead<unknown>;
}

interface Match {
  route: FastRoute;
  input: unknown;
}

/** Characters that make Koa's URL parsing take its slow, normalizing road: leave those to Koa. */
const UNUSUAL_URL = /[\t\n\f\r #\u00a0\ufeff]/;
/** URLs longer than this are matched every time rather than remembered. */
const MAX_REMEMBERED_URL = 512;
const LIMIT = String(KEY_LIMIT.limit);

/** `/v1/rooms/{id}/slots` → a regex of the whole pathname and its parameter names. */
function patternOf(path: string): { regex: RegExp; names: string[] } {
  const names: string[] = [];
  const source = path
    .split(/(\{\w+\})/)
    .map((part) => {
      const param = /^\{(\w+)\}$/.exec(part);
      if (!param) return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      names.push(param[1]!);
      return '([^/]+?)';
    })
    .join('');
  return { regex: new RegExp(`^${source}$`), names };
}

/**
 * The fast-path handler for the GET routes of a table, in registration order (the first route whose
 * pattern matches is the one Koa's router would run; when it has no fast read, Koa answers).
 */
export function compileFastPath(routes: FastRoute[], deps: { keys: KeyStore; limiter: RateLimitStore; log: Logger }): FastPathHandler {
  const { keys, limiter, log } = deps;
  const table = routes.map((route) => ({ route, ...patternOf(route.path) }));
  /** URL → its match, or null for "Koa's" (both depend on the URL alone); bounded, oldest first out. */
  const remembered = new LruMap<string, Match | null>(4096);

  const matchOf = (url: string): Match | null => {
    if (UNUSUAL_URL.test(url)) return null;
    const mark = url.indexOf('?');
    const pathname = mark < 0 ? url : url.slice(0, mark);
    // Koa decodes percent-encoded paths (and routes them case-insensitively): its own answer.
    if (pathname.includes('%')) return null;
    for (const { route, regex, names } of table) {
      const found = regex.exec(pathname);
      if (!found) continue;
      if (!route.read) return null;
      const params: Record<string, string> = {};
      names.forEach((name, i) => (params[name] = found[i + 1]!));
      const input = route.input(params, mark < 0 ? '' : url.slice(mark + 1));
      return input === undefined ? null : { route, input };
    }
    return null;
  };

  /** Per route: its headers after CORS, and those with each precomputed answer header set (flat lists). */
  const bases = new Map(routes.map((route) => [route, [...CORS_LIST, ...route.headers]]));
  const lists = new Map(routes.map((route) => [route, new WeakMap<Headers, HeaderList>()]));
  const headerList = (route: FastRoute, headers: Headers): HeaderList => {
    const memo = lists.get(route)!;
    let list = memo.get(headers);
    if (!list) {
      list = [...bases.get(route)!, ...Object.entries(headers).flat()];
      memo.set(headers, list);
    }
    return list;
  };

  /** Write an answer; `limitHeaders` (keyed routes) go after the route's own headers. */
  const write = (exchange: RawExchange, route: FastRoute, answer: Buffer | RawAnswer, limitHeaders: HeaderList | null): void => {
    if (Buffer.isBuffer(answer)) {
      const json = ['Content-Type', JSON_TYPE, 'Content-Length', String(answer.length)];
      exchange.send(200, bases.get(route)!, answer, limitHeaders ? [...limitHeaders, ...json] : json);
    } else if (limitHeaders) {
      exchange.send(answer.status, bases.get(route)!, answer.body, [...limitHeaders, ...Object.entries(answer.headers).flat()]);
    } else {
      exchange.send(answer.status, headerList(route, answer.headers), answer.body);
    }
  };

  const answer = (exchange: RawExchange, route: FastRoute, produce: () => FastAnswer, limitHeaders: HeaderList | null): void => {
    let result: FastAnswer;
    try {
      result = produce();
    } catch (err) {
      return failWith(exchange, route, limitHeaders, err);
    }
    if (result instanceof Promise) result.then((ready) => write(exchange, route, ready, limitHeaders), (err: unknown) => failWith(exchange, route, limitHeaders, err));
    else write(exchange, route, result, limitHeaders);
  };

  const failWith = (exchange: RawExchange, route: FastRoute, limitHeaders: HeaderList | null, err: unknown): void =>
    exchange.fail(err, limitHeaders ? [...route.headers, ...limitHeaders] : route.headers);

  const keyed = (exchange: RawExchange, route: FastRoute, produce: () => FastAnswer): void => {
    const keyId = authenticate(keys, presentedKey(exchange.req.headers));
    if (keyId instanceof Promise) keyId.then((id) => limited(exchange, route, produce, id), (err: unknown) => exchange.fail(err, route.headers));
    else limited(exchange, route, produce, keyId);
  };

  const limited = (exchange: RawExchange, route: FastRoute, produce: () => FastAnswer, keyId: number | HttpError): void => {
    if (keyId instanceof HttpError) return exchange.fail(keyId, route.headers);
    const decision = hitKeyLimit(limiter, keyId);
    if (decision instanceof Promise) decision.then((ready) => decided(exchange, route, produce, ready), (err: unknown) => exchange.fail(err, route.headers));
    else decided(exchange, route, produce, decision);
  };

  const decided = (exchange: RawExchange, route: FastRoute, produce: () => FastAnswer, decision: RateDecision): void => {
    const limitHeaders = ['X-RateLimit-Limit', LIMIT, 'X-RateLimit-Remaining', String(decision.remaining)];
    if (!decision.allowed) failWith(exchange, route, limitHeaders, keyLimitExceeded());
    else answer(exchange, route, produce, limitHeaders);
  };

  return (req, res) => {
    try {
      const { url, method } = req;
      if (url === undefined || (method !== 'GET' && method !== 'HEAD')) return false;
      // A hit does not refresh its place (the bound matters, not the order; this saves a map write).
      let match = remembered.peek(url);
      if (match === undefined) {
        match = matchOf(url);
        if (url.length <= MAX_REMEMBERED_URL) remembered.set(url, match);
      }
      if (match === null) return false;
      const produce = match.route.read!(match.input, req);
      if (!produce) return false;
      const exchange = new RawExchange(req, res, log);
      labelRoute(res, match.route.path);
      if (match.route.access === 'key') keyed(exchange, match.route, produce);
      else answer(exchange, match.route, produce, null);
      return true;
    } catch (err) {
      // Whatever throws while answering (a SQLite error during a key check, say) is the same generic
      // 500 envelope Koa would send, never a crashed process.
      new RawExchange(req, res, log).fail(err);
      return true;
    }
  };
}

/**
 * The first value of each parameter of a raw query string (no `?`), decoded as Koa decodes it
 * (URLSearchParams): what a Koa route's query schema sees (`?page=2&page=3` reads page 2).
 */
export function firstQueryValues(search: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of new URLSearchParams(search)) if (!Object.hasOwn(out, name)) out[name] = value;
  return out;
}
