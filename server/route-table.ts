/**
 * The route table: every route the server answers — `/v1`, `/files`, the pages and their assets,
 * `/healthz` `/readyz` `/metrics` — is a declaration here: method, path, access, limits, body, the
 * zod schemas of its input, its response kind, and its handler. From the declarations the table
 * builds the routing part of the request path (server/koa-app.ts has the whole order):
 *
 *  - `match`: finds the declarations of the request's path (@koa/router's `match`), sets
 *    `ctx.state.match` and the path's declared headers — on every response of that path, errors and
 *    preflights included (an unmatched path: its area's);
 *  - `routes`: @koa/router's routes, each declaration's own middleware (auth + key limit or IP limit
 *    → body → validation → handler), then 404 for no path, 405 (with `Allow`) for a method the path lacks.
 *
 * The OpenAPI document and the index are generated from the same declarations (server/openapi.ts).
 * Paths match case-insensitively, a trailing slash allowed, parameters percent-decoded (@koa/router).
 */
import { parse as parseQueryString } from 'node:querystring';
import { Router } from '@koa/router';
import { LRUCache } from 'lru-cache';
import { z } from 'zod';
import { HttpError } from './errors.ts';
import { JSON_TYPE } from './http-conditional.ts';
import { requireBearer, requireKey } from './middleware/auth.ts';
import { preflight } from './middleware/cors.ts';
import { depthOf, jsonBody } from './middleware/json-body.ts';
import { ipRateLimit, type RateLimitStore } from './middleware/rate-limit.ts';
import { buildOpenApi, type OpenApiInfo } from './openapi.ts';
import type { KeyStore } from './state/keys.ts';
import { respondWith } from './response.ts';
import type {
  Headers,
  MuseumContextExtras,
  MuseumMiddleware,
  MuseumState,
  PreparedResponse,
  RouteContext,
  RouteStage,
  Services,
} from './types.ts';
import { invalidInput } from './validation.ts';

/** A route group: its declarations and handlers, given the server's services. */
export type RouteModule = (table: RouteTable, services: Services) => void;

type AnyObject = z.ZodObject<z.ZodRawShape>;

export type RouteResponse =
  /** JSON; `precompressed`: its responses carry their own encodings, made once (snapshot responses): koa-compress leaves them. */
  | { json: z.ZodType; status?: number; precompressed?: true }
  /** An event stream; `endsOwnStreams`: the route ends them itself on shutdown (the presence hub). */
  | { sse: string; endsOwnStreams?: true }
  | { binary: string; description: string /** also answers single `Range` requests with 206 */; ranges?: boolean }
  | { html: string };

/** Who may call a route: anyone, an API key holder, or whoever has this bearer token (/metrics). */
type Access = 'public' | 'key' | { bearer: string };

interface RouteInput<P extends AnyObject, Q extends AnyObject, B extends z.ZodType> {
  params: z.output<P>;
  query: z.output<Q>;
  body: z.output<B>;
}

/** What a handler may return instead of setting the body itself: a JSON body (200) or a whole response. */
type HandlerResult = Buffer | PreparedResponse;

export interface RouteDef<P extends AnyObject, Q extends AnyObject, B extends z.ZodType> {
  method: 'GET' | 'POST';
  /** OpenAPI-style path, e.g. `/v1/artworks/{id}`. */
  path: string;
  /** The OpenAPI operationId, named for people (`listArtworks`, `getRoomSlots`); unique in the table. */
  operationId: string;
  summary: string;
  tag: string;
  access: Access;
  /** Per-client-IP budget for public routes (decisions: presence ping, guide routes). */
  ipLimit?: { name: string; perMinute: number };
  params?: P;
  query?: Q;
  body?: B;
  /** The body may be absent (e.g. presence ping); it is still validated when present. */
  bodyOptional?: boolean;
  /** Bodies nested deeper than this are refused (400) before the schema sees them. */
  bodyMaxDepth?: number;
  /** Bodies larger than this many bytes are refused (413) before they are parsed (default: 1 MB). */
  bodyLimit?: number;
  response: RouteResponse;
  /** Headers on every response of this route's path, errors included (e.g. the page policy). */
  headers?: Headers;
  /** Error statuses this route can answer (401/429 are added for keyed routes). */
  errors?: number[];
  /** false: no access line and no request metrics (health probes, /metrics). Default true. */
  logged?: boolean;
  /** false: left out of the OpenAPI document and the index (pages, operations). Default true. */
  documented?: boolean;
  // biome-ignore lint/suspicious/noConfusingVoidType: a handler that sets ctx.body itself returns nothing
  handler: (ctx: RouteContext, input: RouteInput<P, Q, B>) => HandlerResult | void | Promise<HandlerResult | void>;
}

export type AnyRouteDef = RouteDef<AnyObject, AnyObject, z.ZodType>;

/** A parse's outcome: the data, or the error to answer. */
type Parsed = { data: unknown } | { error: HttpError };

/** Raw inputs longer than this are parsed every time rather than remembered. */
const MAX_REMEMBERED_INPUT = 512;

/**
 * A route's parsed path parameters and query strings, by their raw text (bounded): a repeated input —
 * the same room's slots, the same page of artworks — costs a map lookup instead of a zod parse. The
 * parse is a pure function of the text, and the remembered data is frozen (handlers only read it).
 */
class ParsedInputs {
  private readonly seen = new LRUCache<string, Parsed>({ max: 256 });

  constructor(private readonly parse: (raw: string) => Parsed) {}

  get(raw: string): Parsed {
    let parsed = this.seen.get(raw);
    if (parsed === undefined) {
      parsed = this.parse(raw);
      if ('data' in parsed && parsed.data !== null && typeof parsed.data === 'object') Object.freeze(parsed.data);
      if (raw.length <= MAX_REMEMBERED_INPUT) this.seen.set(raw, parsed);
    }
    return parsed;
  }
}

/** A declaration, as @koa/router runs it. */
interface CompiledRoute {
  readonly def: AnyRouteDef;
}

/** The declarations of one path (by method), and its headers. */
interface PathEntry {
  /** The declared path of the first route registered for it (param names may differ by method). */
  path: string;
  routes: Map<string, CompiledRoute>;
  /** `Allow` for a method the path lacks, and what a preflight advertises. */
  allow: string;
  headers: Headers | undefined;
}

/** A request's path matched to its declarations, and its percent-decoded parameters. */
export interface PathMatch {
  entry: PathEntry;
  params: Record<string, string>;
}

/** An area of the path space whose unmatched paths answer with its routes' headers (e.g. `/files/`). */
interface Area {
  prefix: string;
  headers: Headers;
}

// Shared lenient list parameters (decisions: non-integers fall back to the default; out-of-range
// values are clamped; no 400 on these).
const lenientInt = (def: number, min: number, max: number, description: string) =>
  z
    .string()
    .optional()
    .transform((v) => {
      const n = v !== undefined && /^\s*[+-]?\d+\s*$/.test(v) ? Number(v) : NaN;
      return Number.isSafeInteger(n) ? Math.min(max, Math.max(min, n)) : def;
    })
    .meta({ type: 'integer', default: def, minimum: min, maximum: max, description } as Record<string, unknown>);

export const pageParam = () => lenientInt(1, 1, 1_000_000, '1-based page; non-integers fall back to 1');
export const limitParam = (def: number, max = 100) =>
  lenientInt(def, 1, max, `page size 1..${max} (default ${def}); out-of-range values are clamped`);

/** A positive integer path id; anything else is 404 (decisions). */
export const idParam = (max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .regex(/^[1-9]\d{0,15}$/)
    .transform(Number)
    .refine((n) => n <= max)
    .meta({ type: 'integer', minimum: 1, maximum: max } as Record<string, unknown>);

const NOT_FOUND = new HttpError(404, 'NOT_FOUND', 'Not found');
const METHOD_NOT_ALLOWED = new HttpError(405, 'METHOD_NOT_ALLOWED', 'Method not allowed');
const NO_INPUT = {};
/** What the table reads of a @koa/router layer that matched. */
type RouterLayer = { readonly path: string | RegExp; readonly paramNames: readonly unknown[] };

/** A declared path as @koa/router writes it: `/v1/rooms/{id}` → `/v1/rooms/:id`. */
const routerPathOf = (path: string): string => path.replace(/\{(\w+)\}/g, ':$1');

/** The key of a path's entry: its shape, whatever its parameters are named. */
const shapeOf = (path: string): string => path.replace(/\{\w+\}/g, '{}').toLowerCase();

/** Take the first value of repeated query parameters: `?page=1&page=2` reads as page 1. */
function firstValues(query: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(query)) {
    const value = Array.isArray(v) ? v[0] : v;
    if (value !== undefined) out[k] = value;
  }
  return out;
}

/** A handler's returned result onto the context. */
function setResult(ctx: RouteContext, result: HandlerResult): void {
  if (Buffer.isBuffer(result)) {
    ctx.type = JSON_TYPE;
    ctx.body = result;
  } else respondWith(ctx, result);
}

/** The parsers of a route's input (the query string parsed by node's querystring, as Koa parsed it). */
interface InputParsers {
  params: ParsedInputs | null;
  /** The path parameters as one key: the value itself when there is one, else their JSON array. */
  paramsKey: (params: Record<string, string>) => string;
  query: ParsedInputs | null;
}

function inputParsers(def: AnyRouteDef): InputParsers {
  const names = def.params ? Object.keys(def.params.shape) : [];
  const paramsKey = (params: Record<string, string>) =>
    names.length === 1 ? (params[names[0]!] ?? '') : JSON.stringify(names.map((n) => params[n] ?? ''));
  const params = def.params
    ? new ParsedInputs((raw) => {
        const values = names.length === 1 ? [raw] : (JSON.parse(raw) as string[]);
        const parsed = def.params!.safeParse(Object.fromEntries(names.map((name, i) => [name, values[i]])));
        return parsed.success ? { data: parsed.data } : { error: NOT_FOUND };
      })
    : null;
  const query = def.query
    ? new ParsedInputs((raw) => {
        const values = firstValues(parseQueryString(raw));
        const parsed = def.query!.safeParse(values);
        return parsed.success ? { data: parsed.data } : { error: invalidInput(parsed.error, 'query', values) };
      })
    : null;
  return { params, paramsKey, query };
}

/** The route's input from the request, or the 404 (path) / 400 (query, body) to answer. */
function inputOf(def: AnyRouteDef, parsers: InputParsers, ctx: RouteContext): RouteInput<AnyObject, AnyObject, z.ZodType> {
  let params: unknown = NO_INPUT;
  if (parsers.params) {
    const parsed = parsers.params.get(parsers.paramsKey(ctx.params));
    if ('error' in parsed) throw parsed.error;
    params = parsed.data;
  }
  let query: unknown = NO_INPUT;
  if (parsers.query) {
    const parsed = parsers.query.get(ctx.querystring);
    if ('error' in parsed) throw parsed.error;
    query = parsed.data;
  }
  let body: unknown;
  const raw = ctx.state.body;
  if (def.body && !(def.bodyOptional && raw === undefined)) {
    if (def.bodyMaxDepth !== undefined && depthOf(raw, def.bodyMaxDepth) > def.bodyMaxDepth) {
      throw new HttpError(400, 'BAD_REQUEST', `The body is nested deeper than ${def.bodyMaxDepth} levels`, {}, [
        { field: 'body', message: `The body is nested deeper than ${def.bodyMaxDepth} levels` },
      ]);
    }
    const parsed = def.body.safeParse(raw);
    if (!parsed.success) throw invalidInput(parsed.error, 'body', raw);
    body = parsed.data;
  }
  return { params, query, body } as RouteInput<AnyObject, AnyObject, z.ZodType>;
}

export class RouteTable {
  private readonly routes: AnyRouteDef[] = [];
  /** The paths' entries, by their shape (`/v1/rooms/{}`). */
  private readonly entries = new Map<string, PathEntry>();
  /** The entries by the router path of each of their routes (a path's methods may name parameters differently). */
  private readonly byRouterPath = new Map<string, PathEntry>();
  private readonly areas: Area[] = [];
  // 'specificity': a static path wins over a pattern that also matches it (OpenAPI's path matching).
  private readonly router = new Router<MuseumState, MuseumContextExtras>({ exclusive: 'specificity' });

  constructor(private readonly deps: { keys: KeyStore; limiter: RateLimitStore }) {}

  route<P extends AnyObject, Q extends AnyObject, B extends z.ZodType>(declaration: RouteDef<P, Q, B>): void {
    const def = declaration as unknown as AnyRouteDef;
    const entry = this.entryFor(def);
    if (entry.routes.has(def.method)) throw new Error(`${def.method} ${def.path} is declared twice`);
    if (def.headers && entry.headers && entry.headers !== def.headers) throw new Error(`${def.path}: its routes declare different headers`);
    entry.headers ??= def.headers;
    entry.routes.set(def.method, { def });
    entry.allow = [...entry.routes.keys()].flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m])).join(', ');
    const routerPath = routerPathOf(def.path);
    this.byRouterPath.set(routerPath, entry);
    this.router.register(routerPath, [def.method], this.middlewareOf(def), { name: def.operationId });
    this.routes.push(def);
  }

  /** Responses under `prefix` that no route matches (404s) carry `headers`, as the area's routes' responses do. */
  area(prefix: string, headers: Headers): void {
    this.areas.push({ prefix, headers });
  }

  /** The declarations, in registration order. */
  get declarations(): readonly AnyRouteDef[] {
    return this.routes;
  }

  /** `METHOD /path` of every documented route, for the index. */
  get endpoints(): string[] {
    return this.documented.map((def) => `${def.method} ${def.path}`);
  }

  /** The OpenAPI 3.1 document of the documented routes. */
  openapi(info: OpenApiInfo): Record<string, unknown> {
    return buildOpenApi(this.documented, info);
  }

  private get documented(): AnyRouteDef[] {
    return this.routes.filter((def) => def.documented !== false);
  }

  /** The declarations of a request path, if any. */
  lookup(path: string): PathMatch | null {
    const entry = this.entryOf(this.router.match(path, 'GET').path);
    return entry ? { entry, params: NO_INPUT as Record<string, string> } : null;
  }

  /** The entry of the most specific layer of `layers`, as the router's 'specificity' picks it: fewest parameters, the last of equals. */
  private entryOf(layers: readonly RouterLayer[]): PathEntry | undefined {
    let best: RouterLayer | undefined;
    for (const layer of layers) if (!best || layer.paramNames.length <= best.paramNames.length) best = layer;
    return best && typeof best.path === 'string' ? this.byRouterPath.get(best.path) : undefined;
  }

  /**
   * The router's routes, then what no route answered: a preflight (OPTIONS, advertising the path's
   * methods), 405 (with `Allow`) for a method the path lacks, 404 for no path (with its area's headers).
   */
  dispatch(): MuseumMiddleware[] {
    const unrouted: MuseumMiddleware = (ctx) => {
      const entry = this.entryOf((ctx as { matched?: RouterLayer[] }).matched ?? []);
      ctx.state.match = entry ? { entry, params: NO_INPUT as Record<string, string> } : null;
      if (entry?.headers) ctx.set(entry.headers);
      if (ctx.method === 'OPTIONS') return preflight(ctx, entry);
      if (!entry) {
        for (const area of this.areas) if (ctx.path.startsWith(area.prefix)) ctx.set(area.headers);
        throw NOT_FOUND;
      }
      ctx.set('Allow', entry.allow);
      throw METHOD_NOT_ALLOWED;
    };
    return [this.router.routes() as unknown as MuseumMiddleware, unrouted];
  }

  /** A route's own middleware, in order: auth + key limit or IP limit → body → validation → handler. */
  private middlewareOf(def: AnyRouteDef): MuseumMiddleware[] {
    const stages: RouteStage[] = [];
    if (def.access === 'key') stages.push(requireKey(this.deps.keys, this.deps.limiter));
    else if (def.access !== 'public') stages.push(requireBearer(def.access.bearer));
    if (def.ipLimit) stages.push(ipRateLimit(this.deps.limiter, def.ipLimit.name, def.ipLimit.perMinute));
    if (def.body) stages.push(jsonBody({ optional: def.bodyOptional, limit: def.bodyLimit }));
    const parsers = inputParsers(def);
    const entry = this.entries.get(shapeOf(def.path))!;
    const matched: PathMatch = { entry, params: NO_INPUT as Record<string, string> };
    // Answers made once per bake with their own encodings, and event streams (frames must leave as written).
    const uncompressed = ('json' in def.response && def.response.precompressed === true) || 'sse' in def.response;
    // First: what the rest of the path reads (metrics, the access line, compression, the shutdown) and the path's headers.
    const routed: MuseumMiddleware = (ctx, next) => {
      ctx.state.route = def;
      ctx.state.match = matched;
      if (entry.headers) ctx.set(entry.headers);
      if (uncompressed) ctx.compress = false;
      return next();
    };
    const steps: MuseumMiddleware[] = [routed];
    for (const stage of stages) {
      steps.push(async (ctx, next) => {
        await stage(ctx as RouteContext);
        await next();
      });
    }
    steps.push(async function handler(ctx) {
      const result = await def.handler(ctx as RouteContext, inputOf(def, parsers, ctx as RouteContext));
      if (result !== undefined) setResult(ctx as RouteContext, result);
    });
    return steps;
  }

  /** The entry of a declaration's path, created on its first route. */
  private entryFor(def: AnyRouteDef): PathEntry {
    const key = shapeOf(def.path);
    let entry = this.entries.get(key);
    if (!entry) {
      if (!def.path.includes('{')) {
        const shadowedBy = this.lookup(def.path);
        if (shadowedBy) throw new Error(`${def.path} would also match ${shadowedBy.entry.path}: declare paths that cannot overlap`);
      }
      entry = { path: def.path, routes: new Map(), allow: '', headers: undefined };
      this.entries.set(key, entry);
    }
    return entry;
  }
}
