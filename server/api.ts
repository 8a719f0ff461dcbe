/**
 * The routing table: each route declares its access rule, its zod schemas (path, query, body,
 * response), its handler and, when it is served from memory, its fast read. One declaration is
 * compiled into the Koa route (auth, limits, validation, handler), into the fast-path matcher
 * (fastpath.ts) when it has a fast read, and into the OpenAPI 3.1 document, so what is documented,
 * what Koa enforces and what the fast path answers cannot drift apart.
 */
import Router, { type RouterMiddleware } from '@koa/router';
import { z } from 'zod';
import { LruMap } from '../common/lru.ts';
import { HttpError } from './errors.ts';
import { compileFastPath, type FastRead, type FastRoute, firstQueryValues } from './fastpath.ts';
import { JSON_TYPE } from './http-conditional.ts';
import type { AccessLog } from './middleware/access-log.ts';
import { requireKey } from './middleware/auth.ts';
import { setAnswer } from './middleware/errors.ts';
import { buildOpenApi, type OpenApiInfo } from './openapi.ts';
import { depthOf, jsonBody } from './middleware/json-body.ts';
import { ipRateLimit, type RateLimitStore } from './middleware/rate-limit.ts';
import type { KeyStore } from './state/keys.ts';
export { ErrorEnvelope } from './openapi.ts';
import type { FastPathHandler, Headers, MuseumState, RouteContext, Services } from './types.ts';

/** A route group: its declarations and handlers, given the server's services. */
export type RouteModule = (api: Api, services: Services) => void;

type AnyObject = z.ZodObject<z.ZodRawShape>;

export type RouteResponse =
  | { json: z.ZodType; status?: number }
  | { sse: string }
  | { binary: string; description: string; /** also answers single `Range` requests with 206 */ ranges?: boolean };

export interface RouteInput<P extends AnyObject, Q extends AnyObject, B extends z.ZodType> {
  params: z.output<P>;
  query: z.output<Q>;
  body: z.output<B>;
}

export interface RouteDef<P extends AnyObject, Q extends AnyObject, B extends z.ZodType> {
  method: 'GET' | 'POST';
  /** OpenAPI-style path, e.g. `/v1/artworks/{id}`. */
  path: string;
  /** The OpenAPI operationId, named for people (`listArtworks`, `getRoomSlots`); unique in the table. */
  operationId: string;
  summary: string;
  tag: string;
  access: 'key' | 'public';
  /** Per-client-IP budget for public routes (decisions: presence ping, guide routes). */
  ipLimit?: { name: string; perMinute: number };
  params?: P;
  query?: Q;
  body?: B;
  /** The body may be absent (e.g. presence ping); it is still validated when present. */
  bodyOptional?: boolean;
  /** Bodies nested deeper than this are refused (400) before the schema sees them. */
  bodyMaxDepth?: number;
  /** Largest body in bytes, refused (413) before it is parsed (decisions: presence ping 1 KB); default 1 MB. */
  bodyLimit?: number;
  response: RouteResponse;
  /** Headers on every answer of this route, errors included (e.g. the sandbox of /files). */
  headers?: Headers;
  /** Error statuses this route can answer (401/429 are added for keyed routes). */
  errors?: number[];
  /**
   * Served from memory (GET only): the answer for validated input, produced without Koa by the fast
   * path, and by Koa with the same function. When it declines an input (undefined), `handler` answers.
   */
  fast?: FastRead<RouteInput<P, Q, B>>;
  /** Required unless `fast` answers every input. */
  handler?: (ctx: RouteContext, input: RouteInput<P, Q, B>) => unknown | Promise<unknown>;
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

export type AnyRouteDef = RouteDef<AnyObject, AnyObject, z.ZodType>;
type Parsed<T> = { success: true; data: T } | { success: false; error: z.ZodError };
const NOTHING: Parsed<Record<string, never>> = { success: true, data: {} };

/** Take the first value of repeated query parameters: `?page=1&page=2` reads as page 1. */
function firstValues(query: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(query)) {
    const value = Array.isArray(v) ? v[0] : v;
    if (value !== undefined) out[k] = value;
  }
  return out;
}

const describeIssues = (error: z.ZodError): string =>
  error.issues
    .slice(0, 5)
    .map((i) => (i.path.length ? `${i.path.join('.')}: ${i.message}` : i.message))
    .join('; ')
    .slice(0, 500);

export class Api {
  readonly router = new Router<MuseumState>();
  private readonly routes: AnyRouteDef[] = [];

  constructor(private readonly deps: { keys: KeyStore; limiter: RateLimitStore; access: AccessLog }) {}

  route<P extends AnyObject, Q extends AnyObject, B extends z.ZodType>(def: RouteDef<P, Q, B>): void {
    const route = def as unknown as AnyRouteDef;
    if (!route.handler && !route.fast) throw new Error(`${def.method} ${def.path}: a route needs a handler or a fast read`);
    if (route.fast && (def.method !== 'GET' || def.body || def.ipLimit)) throw new Error(`${def.method} ${def.path}: only GETs without a body or IP limit are read from memory`);
    this.routes.push(route);
    const chain: Array<RouterMiddleware<MuseumState>> = [];
    const { headers } = def;
    if (headers) {
      chain.push(async (ctx, next) => {
        ctx.set(headers);
        await next();
      });
    }
    if (def.access === 'key') chain.push(requireKey(this.deps.keys, this.deps.limiter));
    if (def.ipLimit) chain.push(ipRateLimit(this.deps.limiter, def.ipLimit.name, def.ipLimit.perMinute));
    if (def.body) chain.push(jsonBody({ optional: def.bodyOptional, limit: def.bodyLimit }));
    const handle = route.handler ?? fastHandler(route);
    chain.push(async (ctx) => {
      await handle(ctx, this.validate(route, ctx));
    });
    const koaPath = def.path.replace(/\{(\w+)\}/g, ':$1');
    if (def.method === 'GET') this.router.get(koaPath, ...chain);
    else this.router.post(koaPath, ...chain);
  }

  /** The route's input from a Koa request, or the 404 (path) / 400 (query, body) to answer. */
  private validate(def: AnyRouteDef, ctx: RouteContext): RouteInput<AnyObject, AnyObject, z.ZodType> {
    const params = def.params ? def.params.safeParse(ctx.params) : NOTHING;
    if (!params.success) throw new HttpError(404, 'NOT_FOUND', 'Not found');
    const query = def.query ? def.query.safeParse(firstValues(ctx.query)) : NOTHING;
    if (!query.success) throw new HttpError(400, 'BAD_REQUEST', `Invalid query: ${describeIssues(query.error)}`);
    let body: Parsed<unknown> = { success: true, data: undefined };
    const raw = ctx.state.body;
    if (def.body && !(def.bodyOptional && raw === undefined)) {
      if (def.bodyMaxDepth !== undefined && depthOf(raw, def.bodyMaxDepth) > def.bodyMaxDepth) {
        throw new HttpError(400, 'BAD_REQUEST', `Invalid body: nested deeper than ${def.bodyMaxDepth} levels`);
      }
      body = def.body.safeParse(raw);
    }
    if (!body.success) throw new HttpError(400, 'BAD_REQUEST', `Invalid body: ${describeIssues(body.error)}`);
    return { params: params.data, query: query.data, body: body.data };
  }

  /** The fast path of every route with a fast read (GET routes in registration order, as Koa's router matches). */
  fastPath(): FastPathHandler {
    const table: FastRoute[] = this.routes
      .filter((def) => def.method === 'GET')
      .map((def) => ({
        path: def.path,
        access: def.access,
        headers: Object.entries(def.headers ?? {}).flat(),
        input: rawInput(def),
        read: def.fast as FastRead<unknown> | undefined,
      }));
    return compileFastPath(table, this.deps);
  }

  /** Paths of every route, for the index. */
  get endpoints(): string[] {
    return this.routes.map((def) => `${def.method} ${def.path}`);
  }

  /** The route declarations, in registration order. */
  get declarations(): readonly AnyRouteDef[] {
    return this.routes;
  }

  /** The OpenAPI 3.1 document generated from the route declarations (server/openapi.ts). */
  openapi(info: OpenApiInfo): Record<string, unknown> {
    return buildOpenApi(this.routes, info);
  }
}

/** The Koa handler of a route served from memory: the same answer the fast path writes. */
function fastHandler(def: AnyRouteDef) {
  return async (ctx: RouteContext, input: RouteInput<AnyObject, AnyObject, z.ZodType>): Promise<void> => {
    const produce = def.fast!(input, ctx.req);
    if (!produce) throw new Error(`${def.method} ${def.path}: its fast read declined an input and it has no handler`);
    const answer = await produce();
    if (Buffer.isBuffer(answer)) {
      ctx.type = JSON_TYPE;
      ctx.body = answer;
    } else setAnswer(ctx, answer);
  };
}

/**
 * The validated input of a GET route from raw path parameters and a raw query string, as its Koa
 * route would validate them; undefined when they are invalid (Koa answers those). Parsed queries are
 * remembered by their raw string (bounded): a repeated query costs a map lookup, not a zod parse.
 */
function rawInput(def: AnyRouteDef): FastRoute['input'] {
  const queries = new LruMap<string, Parsed<unknown>>(512);
  return (params, search) => {
    const parsedParams = def.params ? def.params.safeParse(params) : NOTHING;
    if (!parsedParams.success) return undefined;
    let query = queries.get(search);
    if (!query) {
      query = def.query ? def.query.safeParse(firstQueryValues(search)) : NOTHING;
      if (search.length <= 512) queries.set(search, query);
    }
    return query.success ? { params: parsedParams.data, query: query.data, body: undefined } : undefined;
  };
}
