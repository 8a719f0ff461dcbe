/**
 * The route table: every route the server answers — `/v1`, `/files`, the pages and their assets,
 * `/healthz` `/readyz` `/metrics` — is a declaration here: method, path, access, limits, body, the
 * zod schemas of its input, its response kind, and its handler. From the declarations the table
 * builds the two routing stages of the request path (server/stages.ts has the whole order):
 *
 *  - `match`: finds the declarations of the request's path (a Map for static paths, then the
 *    patterns of the path's first segments), sets `ctx.state.match` and the path's declared headers —
 *    on every answer of that path, errors and preflights included (an unmatched path: its area's);
 *  - `dispatch`: 404 for no path, 405 for a method the path lacks, else the route's own stages,
 *    composed once at registration: auth + key limit or IP limit → body → validation → handler.
 *
 * The OpenAPI document and the index are generated from the same declarations (server/openapi.ts).
 * Paths match as @koa/router matched them: case-insensitively, a trailing slash allowed, parameters
 * percent-decoded.
 */
import { parse as parseQueryString } from 'node:querystring';
import { LRUCache } from 'lru-cache';
import { z } from 'zod';
import { HttpError } from './errors.ts';
import { JSON_TYPE } from './http-conditional.ts';
import { requireBearer, requireKey } from './middleware/auth.ts';
import { depthOf, jsonBody } from './middleware/json-body.ts';
import { ipRateLimit, type RateLimitStore } from './middleware/rate-limit.ts';
import { buildOpenApi, type OpenApiInfo } from './openapi.ts';
import type { KeyStore } from './state/keys.ts';
import type { Exchange } from './exchange.ts';
import type { Headers, RawAnswer, RouteContext, RouteStage, Services, Stage } from './types.ts';
import { invalidInput } from './validation.ts';

/** A route group: its declarations and handlers, given the server's services. */
export type RouteModule = (table: RouteTable, services: Services) => void;

type AnyObject = z.ZodObject<z.ZodRawShape>;

export type RouteResponse =
  /** JSON; `precompressed`: its answers carry their own encodings, made once (snapshot answers): the compression stage leaves them. */
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

/** What a handler may return instead of setting the body itself: a JSON body (200) or a whole answer. */
type Answer = Buffer | RawAnswer;

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
  /** Headers on every answer of this route's path, errors included (e.g. the page policy). */
  headers?: Headers;
  /** Error statuses this route can answer (401/429 are added for keyed routes). */
  errors?: number[];
  /** false: no access line and no request metrics (health probes, /metrics). Default true. */
  logged?: boolean;
  /** false: left out of the OpenAPI document and the index (pages, operations). Default true. */
  documented?: boolean;
  handler: (ctx: RouteContext, input: RouteInput<P, Q, B>) => Answer | void | Promise<Answer | void>;
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

/** A declaration with its own stages (the handler last). */
interface CompiledRoute {
  readonly def: AnyRouteDef;
  readonly stages: readonly RouteStage[];
}

/** The declarations of one path (by method), and its headers. */
interface PathEntry {
  /** The declared path of the first route registered for it (param names may differ by method). */
  path: string;
  routes: Map<string, CompiledRoute>;
  /** `Allow` for a method the path lacks, and what a preflight advertises. */
  allow: string;
  headers: Headers | undefined;
  /** Null for a static path. */
  pattern: { regex: RegExp; names: string[] } | null;
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
/** A remembered lookup that matched nothing. */
const NO_MATCH = Symbol('no route');

/** A path's key in the static map and in the pattern index: lower case, without a trailing slash. */
const keyOf = (path: string): string => {
  const lower = path.toLowerCase();
  return lower.length > 1 && lower.endsWith('/') ? lower.slice(0, -1) : lower;
};

/** `/v1/rooms/{id}/slots` → a case-insensitive regex of the whole path (trailing slash allowed) and its parameter names. */
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
  return { regex: new RegExp(`^${source}/?$`, 'i'), names };
}

/** The static part of a pattern before its first parameter, cut at its last slash: the key it is indexed under. */
const prefixOf = (path: string): string => path.slice(0, path.lastIndexOf('/', path.indexOf('{')) + 1).toLowerCase();

/** A parameter as @koa/router decoded it: percent-decoded, or as sent when that fails. */
function decoded(value: string): string {
  if (!value.includes('%')) return value;
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/** Take the first value of repeated query parameters: `?page=1&page=2` reads as page 1. */
function firstValues(query: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(query)) {
    const value = Array.isArray(v) ? v[0] : v;
    if (value !== undefined) out[k] = value;
  }
  return out;
}

/** A handler's returned answer onto the context. */
function send(ctx: RouteContext, answer: Answer): void {
  if (Buffer.isBuffer(answer)) {
    ctx.type = JSON_TYPE;
    ctx.body = answer;
  } else ctx.answer(answer);
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
  private readonly staticPaths = new Map<string, PathEntry>();
  /** Pattern paths by the static prefix before their first parameter (`/v1/rooms/`), in registration order. */
  private readonly patterns = new Map<string, PathEntry[]>();
  private readonly areas: Area[] = [];
  /** Paths looked up, and what they matched. */
  private readonly found = new LRUCache<string, PathMatch | typeof NO_MATCH>({ max: 1024 });

  constructor(private readonly deps: { keys: KeyStore; limiter: RateLimitStore }) {}

  route<P extends AnyObject, Q extends AnyObject, B extends z.ZodType>(declaration: RouteDef<P, Q, B>): void {
    const def = declaration as unknown as AnyRouteDef;
    this.found.clear();
    const entry = this.entryFor(def);
    if (entry.routes.has(def.method)) throw new Error(`${def.method} ${def.path} is declared twice`);
    if (def.headers && entry.headers && entry.headers !== def.headers) throw new Error(`${def.path}: its routes declare different headers`);
    entry.headers ??= def.headers;
    entry.routes.set(def.method, { def, stages: this.stagesOf(def) });
    entry.allow = [...entry.routes.keys()].flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m])).join(', ');
    this.routes.push(def);
  }

  /** Answers under `prefix` that no route matches (404s) carry `headers`, as the area's routes' answers do. */
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

  /**
   * The declarations of a request path, if any, remembered by the path as sent (bounded): a repeated
   * path — the same room's slots — costs one lookup instead of a case fold and a pattern match.
   */
  lookup(path: string): PathMatch | null {
    const remembered = this.found.get(path);
    if (remembered !== undefined) return remembered === NO_MATCH ? null : remembered;
    const match = this.search(path);
    if (path.length <= MAX_REMEMBERED_INPUT) this.found.set(path, match ?? NO_MATCH);
    return match;
  }

  private search(path: string): PathMatch | null {
    const found = this.staticPaths.get(keyOf(path));
    if (found) return { entry: found, params: NO_INPUT as Record<string, string> };
    const lower = path.toLowerCase();
    for (let slash = lower.indexOf('/'); slash >= 0; slash = lower.indexOf('/', slash + 1)) {
      const candidates = this.patterns.get(lower.slice(0, slash + 1));
      if (!candidates) continue;
      for (const entry of candidates) {
        const values = entry.pattern!.regex.exec(path);
        if (!values) continue;
        const params: Record<string, string> = {};
        const { names } = entry.pattern!;
        for (let i = 0; i < names.length; i++) params[names[i]!] = decoded(values[i + 1]!);
        return { entry, params: Object.freeze(params) };
      }
    }
    return null;
  }

  /** The route-match stage: `ex.state.match`, the answering `ex.state.route`, `ex.params`, and the path's declared headers. */
  match(): Stage {
    return {
      request: (ex) => {
        const path = ex.path;
        const match = this.lookup(path);
        ex.state.match = match;
        if (match) {
          ex.params = match.params;
          ex.state.route = match.entry.routes.get(ex.method === 'HEAD' ? 'GET' : ex.method)?.def;
          if (match.entry.headers) ex.set(match.entry.headers);
        } else {
          for (const area of this.areas) if (path.startsWith(area.prefix)) ex.set(area.headers);
        }
      },
    };
  }

  /** The dispatch stage: 404, 405 (with `Allow`), or the matched route's own stages, in order. */
  dispatch(): Stage {
    return {
      request(ex) {
        const match = ex.state.match;
        if (!match) throw NOT_FOUND;
        const route = match.entry.routes.get(ex.method === 'HEAD' ? 'GET' : ex.method);
        if (!route) {
          ex.set('Allow', match.entry.allow);
          throw METHOD_NOT_ALLOWED;
        }
        return inSequence(route.stages, ex, 0);
      },
    };
  }

  /** A route's own stages, in order: auth + key limit or IP limit → body → validation → handler. */
  private stagesOf(def: AnyRouteDef): RouteStage[] {
    const stages: RouteStage[] = [];
    if (def.access === 'key') stages.push(requireKey(this.deps.keys, this.deps.limiter));
    else if (def.access !== 'public') stages.push(requireBearer(def.access.bearer));
    if (def.ipLimit) stages.push(ipRateLimit(this.deps.limiter, def.ipLimit.name, def.ipLimit.perMinute));
    if (def.body) stages.push(jsonBody({ optional: def.bodyOptional, limit: def.bodyLimit }));
    const parsers = inputParsers(def);
    stages.push(async function handlerStage(ex) {
      const answer = await def.handler(ex, inputOf(def, parsers, ex));
      if (answer !== undefined) send(ex, answer);
    });
    return stages;
  }

  /** The entry of a declaration's path, created on its first route. */
  private entryFor(def: AnyRouteDef): PathEntry {
    const isPattern = def.path.includes('{');
    const key = isPattern ? def.path.replace(/\{\w+\}/g, '{}').toLowerCase() : keyOf(def.path);
    if (!isPattern) {
      let entry = this.staticPaths.get(key);
      if (!entry) {
        const shadowedBy = this.search(def.path);
        if (shadowedBy) throw new Error(`${def.path} would also match ${shadowedBy.entry.path}: declare paths that cannot overlap`);
        entry = { path: def.path, routes: new Map(), allow: '', headers: undefined, pattern: null };
        this.staticPaths.set(key, entry);
      }
      return entry;
    }
    const prefix = prefixOf(def.path);
    const group = this.patterns.get(prefix) ?? [];
    let entry = group.find((e) => e.path.replace(/\{\w+\}/g, '{}').toLowerCase() === key);
    if (!entry) {
      entry = { path: def.path, routes: new Map(), allow: '', headers: undefined, pattern: patternOf(def.path) };
      group.push(entry);
      this.patterns.set(prefix, group);
    }
    return entry;
  }
}

/** Run route stages in order from `from`, waiting only for those that return a promise. */
function inSequence(stages: readonly RouteStage[], ex: Exchange, from: number): void | Promise<void> {
  for (let i = from; i < stages.length; i++) {
    const pending = stages[i]!(ex);
    if (pending !== undefined) return pending.then(() => inSequence(stages, ex, i + 1));
  }
}
