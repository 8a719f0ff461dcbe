/**
 * The OpenAPI 3.1 document as a function of the route declarations (server/api.ts): the same
 * declarations Koa and the fast path enforce, so what is documented cannot drift from what is served.
 */
import { z } from 'zod';
import type { AnyRouteDef } from './api.ts';

export interface OpenApiInfo {
  title: string;
  version: string;
  description: string;
  serverUrl: string;
}

export const ErrorEnvelope = z
  .object({
    errors: z.array(z.object({ message: z.string(), extensions: z.object({ code: z.string() }) })).min(1),
  })
  .meta({ id: 'ErrorEnvelope' });

const STATUS_TEXT: Record<number, string> = {
  304: 'Not modified',
  400: 'Invalid request',
  401: 'Missing, unknown or revoked API key',
  404: 'Not found',
  409: 'Conflict',
  413: 'Payload too large',
  416: 'Range not satisfiable',
  429: 'Rate limit exceeded (Retry-After: 60)',
  502: 'Upstream temporarily unavailable',
  503: 'Not configured, at capacity, or a store the server needs is down',
};

type AnyObject = z.ZodObject<z.ZodRawShape>;

/** The OpenAPI 3.1 document of these routes. */
export function buildOpenApi(routes: readonly AnyRouteDef[], info: OpenApiInfo): Record<string, unknown> {
  const components: Record<string, unknown> = {};
  const schemaOf = (schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> => {
    const json = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Record<string, unknown>;
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
  schemaOf(ErrorEnvelope, 'output');

  const paths: Record<string, Record<string, unknown>> = {};
  const operationIds = new Set<string>();
  for (const def of routes) {
    if (operationIds.has(def.operationId)) throw new Error(`${def.method} ${def.path}: operationId ${def.operationId} is already taken`);
    operationIds.add(def.operationId);
    const parameters: unknown[] = [];
    for (const [where, obj] of [['path', def.params], ['query', def.query]] as const) {
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
    const responses: Record<string, unknown> = {};
    const r = def.response;
    if ('json' in r) responses[String(r.status ?? 200)] = { description: 'OK', content: { 'application/json': { schema: schemaOf(r.json, 'output') } } };
    else if ('sse' in r) responses['200'] = { description: r.sse, content: { 'text/event-stream': { schema: { type: 'string' } } } };
    else {
      const content = { [r.binary]: { schema: { type: 'string', format: 'binary' } } };
      responses['200'] = { description: r.description, content };
      if (r.ranges) responses['206'] = { description: 'Partial content (one byte range)', content };
    }
    const errors = new Set([...(def.errors ?? []), ...(def.access === 'key' ? [401, 429, 503] : []), ...(def.ipLimit ? [429] : [])]);
    if (def.body) errors.add(400).add(413);
    if (def.query && queryCanFail(def.query)) errors.add(400);
    for (const status of [...errors].sort()) {
      responses[String(status)] =
        status === 304
          ? { description: STATUS_TEXT[304] }
          : { description: STATUS_TEXT[status] ?? 'Error', content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } } };
    }
    const operation: Record<string, unknown> = {
      operationId: def.operationId,
      summary: def.summary,
      tags: [def.tag],
      parameters,
      responses,
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
    info: { title: info.title, version: info.version, description: info.description },
    servers: [{ url: info.serverUrl }],
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
        bearer: { type: 'http', scheme: 'bearer' },
      },
    },
  };
}

/**
 * Whether query validation can answer 400: a required parameter, or a value some parameter rejects.
 * Lenient parameters (page/limit fall back and clamp) never do, and then no 400 is documented.
 */
function queryCanFail(query: AnyObject): boolean {
  if (!query.safeParse({}).success) return true;
  const probes = ['', 'x', '-1', '0', '1.5', '99999999999999999999', 'a'.repeat(300)];
  return Object.keys(query.shape).some((name) => probes.some((value) => !query.safeParse({ [name]: value }).success));
}

/** Point zod's local `#/$defs/X` references at the document's components. */
function relink(schema: unknown): unknown {
  return JSON.parse(JSON.stringify(schema).replaceAll('"#/$defs/', '"#/components/schemas/'));
}
