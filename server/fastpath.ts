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
import { LruMap } from '../common/lru.ts';
import { HttpError } from './errors.ts';
import { JSON_TYPE } from './http-conditional.ts';
import { authenticate, presentedKey } from './middleware/auth.ts';
import type { AccessLog } from './middleware/access-log.ts';
import { type HeaderList, pathOf, type PreparedList, preparedIndex, preparedList, RawExchange } from './middleware/raw-exchange.ts';
import { hitKeyLimit, KEY_LIMIT, keyLimitExceeded, type RateDecision, type RateLimitStore } from './middleware/rate-limit.ts';
import { labelRoute } from './request-metrics.ts';
import type { KeyStore } from './state/keys.ts';
import type { FastPathHandler, RawAnswer } from './types.ts';

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

/** A route of the table with its pattern, and the header lists of its precomputed answers. */
interface CompiledRoute {
  route: FastRoute;
  regex: RegExp;
  names: string[];
  /** Per precomputed header set (or JSON body): its whole list, for public answers and for keyed ones. */
  lists: WeakMap<object, PreparedList>;
  keyedLists: WeakMap<object, PreparedList>;
  /** In a keyed list: the value slot of X-RateLimit-Remaining (after the route's headers and the limit's). */
  remainingAt: number;
}

interface Match {
  compiled: CompiledRoute;
  input: unknown;
  /** The URL's path (the access line's). */
  path: string;
}

/** Characters that make Koa's URL parsing take its slow, normalizing road: leave those to Koa. */
const UNUSUAL_URL = /[\t\n\f\r #\u00a0\ufeff]/;
/** URLs longer than this are matched every time rather than remembered. */
const MAX_REMEMBERED_URL = 512;
const LIMIT = String(KEY_LIMIT.limit);
const LIMIT_NAME = 'X-RateLimit-Limit';
const REMAINING_NAME = 'X-RateLimit-Remaining';

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

/** An answer's own headers (a JSON body: its type and length) as a flat list. */
const answerHeaders = (answer: Buffer | RawAnswer): HeaderList =>
  Buffer.isBuffer(answer) ? ['Content-Type', JSON_TYPE, 'Content-Length', String(answer.length)] : Object.entries(answer.headers).flat();

/**
 * The header list of a precomputed answer of a route, built on its first request: the route's
 * headers, then (keyed) the rate-limit headers with the remaining count's slot, then the answer's.
 * Keyed by the answer's header set (or its JSON body), which lives as long as the snapshot it came from.
 */
function listOf(compiled: CompiledRoute, answer: Buffer | RawAnswer, keyed: boolean): PreparedList {
  const key = Buffer.isBuffer(answer) ? answer : answer.headers;
  const memo = keyed ? compiled.keyedLists : compiled.lists;
  let list = memo.get(key);
  if (!list) {
    const limits = keyed ? [LIMIT_NAME, LIMIT, REMAINING_NAME, ''] : [];
    list = preparedList(compiled.route.headers, limits, answerHeaders(answer));
    memo.set(key, list);
  }
  return list;
}

/**
 * The fast-path handler for the GET routes of a table, in registration order (the first route whose
 * pattern matches is the one Koa's router would run; when it has no fast read, Koa answers).
 */
export function compileFastPath(routes: FastRoute[], deps: { keys: KeyStore; limiter: RateLimitStore; access: AccessLog }): FastPathHandler {
  const { keys, limiter, access } = deps;
  const table = routes.map(
    (route): CompiledRoute => ({
      route,
      ...patternOf(route.path),
      lists: new WeakMap(),
      keyedLists: new WeakMap(),
      remainingAt: preparedIndex(route.headers.length / 2 + 1) + 1,
    }),
  );
  /** URL → its match, or null for "Koa's" (both depend on the URL alone); bounded, oldest first out. */
  const remembered = new LruMap<string, Match | null>(4096);

  const matchOf = (url: string): Match | null => {
    if (UNUSUAL_URL.test(url)) return null;
    const path = pathOf(url);
    // Koa decodes percent-encoded paths (and routes them case-insensitively): its own answer.
    if (path.includes('%')) return null;
    for (const compiled of table) {
      const found = compiled.regex.exec(path);
      if (!found) continue;
      if (!compiled.route.read) return null;
      const params: Record<string, string> = {};
      compiled.names.forEach((name, i) => (params[name] = found[i + 1]!));
      const input = compiled.route.input(params, url.slice(path.length + 1));
      return input === undefined ? null : { compiled, input, path };
    }
    return null;
  };

  /** Write an answer; `remaining` (keyed routes) fills the rate-limit slot of its list. */
  const write = (exchange: RawExchange, compiled: CompiledRoute, answer: Buffer | RawAnswer, remaining: number | null): void => {
    const list = listOf(compiled, answer, remaining !== null);
    if (remaining !== null) list[compiled.remainingAt] = String(remaining);
    exchange.sendPrepared(Buffer.isBuffer(answer) ? 200 : answer.status, list, Buffer.isBuffer(answer) ? answer : answer.body);
  };

  const answer = (exchange: RawExchange, compiled: CompiledRoute, produce: () => FastAnswer, remaining: number | null): void => {
    let result: FastAnswer;
    try {
      result = produce();
    } catch (err) {
      return failWith(exchange, compiled.route, remaining, err);
    }
    if (result instanceof Promise) result.then((ready) => write(exchange, compiled, ready, remaining), (err: unknown) => failWith(exchange, compiled.route, remaining, err));
    else write(exchange, compiled, result, remaining);
  };

  const failWith = (exchange: RawExchange, route: FastRoute, remaining: number | null, err: unknown): void =>
    exchange.fail(err, remaining === null ? route.headers : [...route.headers, LIMIT_NAME, LIMIT, REMAINING_NAME, String(remaining)]);

  const keyed = (exchange: RawExchange, compiled: CompiledRoute, produce: () => FastAnswer): void => {
    const keyId = authenticate(keys, presentedKey(exchange.req.headers));
    if (keyId instanceof Promise) keyId.then((id) => limited(exchange, compiled, produce, id), (err: unknown) => exchange.fail(err, compiled.route.headers));
    else limited(exchange, compiled, produce, keyId);
  };

  const limited = (exchange: RawExchange, compiled: CompiledRoute, produce: () => FastAnswer, keyId: number | HttpError): void => {
    if (keyId instanceof HttpError) return exchange.fail(keyId, compiled.route.headers);
    const decision = hitKeyLimit(limiter, keyId);
    if (decision instanceof Promise) decision.then((ready) => decided(exchange, compiled, produce, ready), (err: unknown) => exchange.fail(err, compiled.route.headers));
    else decided(exchange, compiled, produce, decision);
  };

  const decided = (exchange: RawExchange, compiled: CompiledRoute, produce: () => FastAnswer, decision: RateDecision): void => {
    if (!decision.allowed) failWith(exchange, compiled.route, decision.remaining, keyLimitExceeded());
    else answer(exchange, compiled, produce, decision.remaining);
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
      const { compiled } = match;
      const produce = compiled.route.read!(match.input, req);
      if (!produce) return false;
      const exchange = new RawExchange(req, res, access, match.path);
      labelRoute(res, compiled.route.path);
      if (compiled.route.access === 'key') keyed(exchange, compiled, produce);
      else answer(exchange, compiled, produce, null);
      return true;
    } catch (err) {
      // Whatever throws while answering (a SQLite error during a key check, say) is the same generic
      // 500 envelope Koa would send, never a crashed process.
      new RawExchange(req, res, access, pathOf(req.url ?? '/')).fail(err);
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
