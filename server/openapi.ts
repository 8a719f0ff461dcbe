/**
 * The OpenAPI 3.1 document as a function of the route declarations (server/route-table.ts): the same
 * declarations the route table enforces, so what is documented cannot drift from what is served.
 * Fit for code generators (decisions.md "Clients of the HTTP API"): operationIds named for people,
 * an example for every response, the response headers, each status's error codes as an enum, and
 * response objects open to new fields (clients must ignore fields they do not know).
 */
import { z } from 'zod';
import type { ErrorCode } from './errors.ts';
import RESPONSE_EXAMPLES from './openapi-examples.json' with { type: 'json' };

/** What the document reads of a route declaration (the route table's declarations satisfy it). */
export interface DocumentedRoute {
  method: string;
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  access: unknown;
  ipLimit?: unknown;
  params?: z.ZodObject<z.ZodRawShape>;
  query?: z.ZodObject<z.ZodRawShape>;
  body?: z.ZodType;
  bodyOptional?: boolean;
  response:
    | { json: z.ZodType; status?: number }
    | { sse: string }
    | { binary: string; description: string; ranges?: boolean }
    /** Not part of the API document (pages). */
    | { html: string };
  errors?: number[];
}

export interface OpenApiInfo {
  title: string;
  version: string;
  description: string;
  /** OpenAPI 3.1 License Object: an SPDX identifier (never also a url). */
  license: { name: string; identifier: string };
}

interface ErrorStatus {
  schema: string;
  codes: ErrorCode[];
  description: string;
  /** The example's message. */
  message: string;
  /** Each error names the input field at fault (`extensions.field`). */
  namesField: boolean;
}
const errorStatus = (schema: string, codes: ErrorCode[], description: string, message: string, namesField = false): ErrorStatus => ({
  schema,
  codes,
  description,
  message,
  namesField,
});

/** Each error status: its schema's name, the codes it carries, what it means and an example message. */
const ERROR_STATUSES: Record<number, ErrorStatus> = {
  400: errorStatus(
    'BadRequestError',
    ['BAD_REQUEST'],
    'Invalid request: one error per problem, each naming its field',
    'q is required',
    true,
  ),
  401: errorStatus('UnauthorizedError', ['UNAUTHORIZED'], 'Missing, unknown or revoked API key', 'Invalid or revoked API key'),
  404: errorStatus('NotFoundError', ['NOT_FOUND'], 'Not found', 'Not found'),
  409: errorStatus('ConflictError', ['CONFLICT'], 'Conflict', 'This exhibition id belongs to another owner'),
  413: errorStatus('PayloadTooLargeError', ['PAYLOAD_TOO_LARGE'], 'Payload too large', 'Request body exceeds 1 MB'),
  416: errorStatus('RangeNotSatisfiableError', ['RANGE_NOT_SATISFIABLE'], 'Range not satisfiable', 'Range not satisfiable'),
  429: errorStatus(
    'RateLimitedError',
    ['RATE_LIMITED'],
    'Rate limit exceeded (Retry-After says when to try again)',
    'Rate limit exceeded: 120 requests per minute per key',
  ),
  500: errorStatus('InternalError', ['INTERNAL'], 'Internal error (its detail is logged under the X-Request-Id)', 'Internal server error'),
  502: errorStatus('UpstreamError', ['UPSTREAM'], 'Upstream temporarily unavailable', 'The Library is temporarily unavailable'),
  503: errorStatus(
    'UnavailableError',
    ['UNCONFIGURED', 'BUSY', 'UNAVAILABLE'],
    'Not configured (UNCONFIGURED), at capacity (BUSY), or a store the server needs is down (UNAVAILABLE)',
    'The Library is not configured on this deployment',
  ),
};

/**
 * Any operation's other 4XX: refusals of the request path before any route sees the request, each
 * with the envelope and a request id (server/sockets/connections.ts, server/middleware/errors.ts).
 */
const REQUEST_ERROR = errorStatus(
  'RequestError',
  ['BAD_REQUEST'],
  'The request could not be read: 400 (no Host header, or malformed), 408 (not received in time), ' +
    '417 (an Expect other than 100-continue) or 431 (headers too large); the connection is closed after it',
  'The Host header is required',
);

const header = (description: string, schema: Record<string, unknown> = { type: 'string' }) => ({ description, schema });
const HEADERS = {
  'X-Request-Id': header("This request's id (yours when you sent a valid X-Request-Id, else a new one); logs carry it"),
  'X-RateLimit-Limit': header('Requests allowed per 60 s sliding window', { type: 'integer', example: 120 }),
  'X-RateLimit-Remaining': header('Requests left in the current window', { type: 'integer', example: 117 }),
  'X-RateLimit-Reset': header('Seconds until the oldest counted request leaves the window', { type: 'integer', example: 42 }),
  'Retry-After': header('Seconds to wait before trying again', { type: 'integer', example: 60 }),
  'WWW-Authenticate': header('The scheme to authenticate with', { type: 'string', example: 'Bearer realm="museum"' }),
  ETag: header('Strong validator of this representation: send it back as If-None-Match for a 304', {
    type: 'string',
    example: '"kq3C0mF6tq1oQ3wC4pZl2xkS3oWJ8yQe"',
  }),
  'Cache-Control': header('Keyed responses: private, no-cache (revalidate with If-None-Match); public ones: public, no-cache'),
  Vary: header('Accept-Encoding: the representation depends on it', { type: 'string', example: 'Accept-Encoding' }),
  'Content-Encoding': header('br or gzip when Accept-Encoding allows it and it saves bytes', { type: 'string', enum: ['br', 'gzip'] }),
} as const;
type HeaderName = keyof typeof HEADERS;
const headerRefs = (names: HeaderName[]) => Object.fromEntries(names.map((name) => [name, { $ref: `#/components/headers/${name}` }]));

/** An error status's envelope: its codes as an enum; a route's 400 (`names`) also names the field at fault. */
function errorSchema({ codes, namesField }: ErrorStatus): Record<string, unknown> {
  const extensions: Record<string, unknown> = {
    type: 'object',
    required: ['code'],
    properties: {
      code: { type: 'string', enum: codes },
      ...(namesField ? { field: { type: 'string', description: 'the query parameter, or the dotted body path, at fault' } } : {}),
    },
  };
  const error = { type: 'object', required: ['message', 'extensions'], properties: { message: { type: 'string' }, extensions } };
  return { type: 'object', required: ['errors'], properties: { errors: { type: 'array', minItems: 1, items: error } } };
}

function errorExample({ codes, message, namesField }: ErrorStatus): unknown {
  return { errors: [{ message, extensions: { code: codes[0], ...(namesField ? { field: 'q' } : {}) } }] };
}

/** Response objects stay open to new fields: drop zod's `additionalProperties: false` from output schemas. */
function openObjects(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(openObjects);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'additionalProperties' && value === false) continue;
    out[key] = openObjects(value);
  }
  return out;
}

/** The OpenAPI 3.1 document of these routes. */
export function buildOpenApi(routes: readonly DocumentedRoute[], info: OpenApiInfo): Record<string, unknown> {
  const components: Record<string, unknown> = {};
  const schemaOf = (schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> => {
    const converted = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Record<string, unknown>;
    const json = (io === 'output' ? openObjects(converted) : converted) as Record<string, unknown>;
    const defs = (json.$defs ?? {}) as Record<string, unknown>;
    delete json.$defs;
    delete json.$schema;
    for (const [id, def] of Object.entries(defs)) components[id] = relink(def);
    const id = (z.globalRegistry.get(schema) as { id?: string } | undefined)?.id;
    if (id) {
      if (json.$ref === undefined) components[id] = relink(json);
      return { $ref: `#/components/schemas/${id}` };
    }
    return relink(json) as Record<string, unknown>;
  };
  for (const status of [...Object.values(ERROR_STATUSES), REQUEST_ERROR]) components[status.schema] = errorSchema(status);
  const errorResponses: Record<string, unknown> = { [REQUEST_ERROR.schema]: requestErrorResponse() };

  const paths: Record<string, Record<string, unknown>> = {};
  const operationIds = new Set<string>();
  for (const def of routes) {
    if ('html' in def.response) continue;
    if (operationIds.has(def.operationId)) throw new Error(`${def.method} ${def.path}: operationId ${def.operationId} is already taken`);
    operationIds.add(def.operationId);
    const operation: Record<string, unknown> = {
      operationId: def.operationId,
      summary: def.summary,
      tags: [def.tag],
      parameters: parametersOf(def, schemaOf),
      responses: responsesOf(def, schemaOf, errorResponses),
      ...(def.access === 'key' ? { security: [{ apiKey: [] }, { bearer: [] }] } : { security: [] }),
    };
    if (def.body) {
      operation.requestBody = {
        required: !def.bodyOptional,
        content: { 'application/json': { schema: schemaOf(def.body, 'input') } },
      };
    }
    (paths[def.path] ??= {})[def.method.toLowerCase()] = operation;
  }
  return {
    openapi: '3.1.0',
    info: { title: info.title, version: info.version, description: info.description, license: info.license },
    // Relative only: "Try it out" in /docs reaches the origin the page came from, and no deployment's
    // own address is baked into the types a code generator makes of this document.
    servers: [{ url: '/', description: 'The origin this document was fetched from (a client sets its own base URL)' }],
    paths,
    components: {
      schemas: components,
      responses: errorResponses,
      headers: HEADERS,
      securitySchemes: {
        apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
        bearer: { type: 'http', scheme: 'bearer' },
      },
    },
  };
}

type SchemaOf = (schema: z.ZodType, io: 'input' | 'output') => Record<string, unknown>;

function parametersOf(def: DocumentedRoute, schemaOf: SchemaOf): unknown[] {
  const parameters: unknown[] = [];
  for (const [where, obj] of [
    ['path', def.params],
    ['query', def.query],
  ] as const) {
    if (!obj) continue;
    for (const [name, prop] of Object.entries(obj.shape)) {
      const schema = schemaOf(prop as z.ZodType, 'input');
      parameters.push({
        name,
        in: where,
        required: where === 'path' || !(prop as z.ZodType).safeParse(undefined).success,
        schema,
        ...(schema.description ? { description: schema.description } : {}),
      });
    }
  }
  return parameters;
}

/**
 * The route's responses: its success with its example, 304 when it sends validators, and its errors as
 * references to `errorResponses` (one per status and rate-limit header set, shared by every route).
 */
function responsesOf(def: DocumentedRoute, schemaOf: SchemaOf, errorResponses: Record<string, unknown>): Record<string, unknown> {
  const responses: Record<string, unknown> = {};
  const counted: HeaderName[] = ['X-RateLimit-Limit', 'X-RateLimit-Remaining'];
  const limited: HeaderName[] = def.access === 'key' ? [...counted, 'X-RateLimit-Reset'] : def.ipLimit ? counted : [];
  const validated = def.errors?.includes(304) ?? false;
  const validators: HeaderName[] = validated ? ['ETag', 'Cache-Control', 'Vary'] : [];
  const okHeaders = headerRefs(['X-Request-Id', ...limited, ...validators, ...(validated ? (['Content-Encoding'] as const) : [])]);
  const example = (RESPONSE_EXAMPLES as Record<string, unknown>)[def.operationId];
  const r = def.response;
  if ('json' in r) {
    const content = { 'application/json': { schema: schemaOf(r.json, 'output'), ...(example === undefined ? {} : { example }) } };
    responses[String(r.status ?? 200)] = { description: 'OK', headers: okHeaders, content };
  } else if ('sse' in r) {
    const content = { 'text/event-stream': { schema: { type: 'string' }, ...(example === undefined ? {} : { example }) } };
    responses['200'] = { description: r.sse, headers: okHeaders, content };
  } else if ('binary' in r) {
    const content = { [r.binary]: { schema: { type: 'string', format: 'binary' } } };
    responses['200'] = { description: r.description, headers: okHeaders, content };
    if (r.ranges) responses['206'] = { description: 'Partial content (one byte range)', headers: okHeaders, content };
  }
  const errors = new Set([...(def.errors ?? []), 500, ...(def.access === 'key' ? [401, 429, 503] : []), ...(def.ipLimit ? [429] : [])]);
  if (def.body) errors.add(400).add(413);
  if (def.query && queryCanFail(def.query)) errors.add(400);
  for (const status of [...errors].sort()) {
    if (status === 304) {
      const headers = headerRefs(['X-Request-Id', ...limited, ...validators]);
      responses['304'] = { description: 'Not modified: the representation named by If-None-Match is current', headers };
      continue;
    }
    const variant = status === 401 || limited.length === 0 ? '' : def.access === 'key' ? 'Keyed' : 'IpLimited';
    const name = `${ERROR_STATUSES[status]?.schema ?? `Error${status}`}${variant}`;
    errorResponses[name] ??= errorResponseObject(status, status === 401 ? [] : limited);
    responses[String(status)] = { $ref: `#/components/responses/${name}` };
  }
  responses['4XX'] = { $ref: `#/components/responses/${REQUEST_ERROR.schema}` };
  return responses;
}

/** The 4XX range of every operation: answered before routing, so with a request id but no rate-limit headers. */
function requestErrorResponse(): Record<string, unknown> {
  const schema = { $ref: `#/components/schemas/${REQUEST_ERROR.schema}` };
  const content = { 'application/json': { schema, example: errorExample(REQUEST_ERROR) } };
  return { description: REQUEST_ERROR.description, headers: headerRefs(['X-Request-Id']), content };
}

/** An error response: its envelope (codes as an enum) with an example, and its headers. */
function errorResponseObject(status: number, limited: HeaderName[]): Record<string, unknown> {
  const known = ERROR_STATUSES[status];
  const names: HeaderName[] = ['X-Request-Id', ...limited];
  if (status === 401) names.push('WWW-Authenticate');
  if (status === 429 || status === 503) names.push('Retry-After');
  if (!known) throw new Error(`error status ${status} has no description in server/openapi.ts ERROR_STATUSES`);
  const schema = { $ref: `#/components/schemas/${known.schema}` };
  const content = { 'application/json': { schema, example: errorExample(known) } };
  return { description: known.description, headers: headerRefs(names), content };
}

/**
 * Whether query validation can answer 400: a required parameter, or a value some parameter rejects.
 * Lenient parameters (page/limit fall back and clamp) never do, and then no 400 is documented.
 */
function queryCanFail(query: z.ZodObject<z.ZodRawShape>): boolean {
  if (!query.safeParse({}).success) return true;
  const probes = ['', 'x', '-1', '0', '1.5', '99999999999999999999', 'a'.repeat(300)];
  return Object.keys(query.shape).some((name) => probes.some((value) => !query.safeParse({ [name]: value }).success));
}

/** Point zod's local `#/$defs/X` references at the document's components. */
function relink(schema: unknown): unknown {
  return JSON.parse(JSON.stringify(schema).replaceAll('"#/$defs/', '"#/components/schemas/'));
}
