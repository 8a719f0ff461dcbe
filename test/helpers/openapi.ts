/**
 * Check real responses against the server's OpenAPI 3.1 document:
 *
 *   const doc = await (await server.get('/v1/openapi.json')).json();
 *   validateAgainstOpenApi(doc, 'GET', '/v1/artworks/101', res.status, await res.json());
 *
 * `path` may be a concrete request path (query string ignored) or a documented template. The status
 * must be documented for the operation (itself, or its `4XX` range); a JSON body is validated with
 * ajv (draft 2020-12) against the response schema, `#/components/schemas/…` references resolved; a
 * documented response without content (304) must come without a body. Throws an Error listing the problems.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';

export interface OpenApiDoc {
  openapi: string;
  paths: Record<string, Record<string, OpenApiOperation>>;
  components?: { schemas?: Record<string, unknown>; responses?: Record<string, OpenApiResponse> };
}

/** A response, or (`$ref`) a reference to one of `components.responses`. */
export interface OpenApiResponse {
  description: string;
  content?: Record<string, { schema: unknown }>;
  $ref?: string;
}

/** A documented response, its `#/components/responses/…` reference resolved. */
export function resolveResponse(doc: OpenApiDoc, response: OpenApiResponse): OpenApiResponse {
  return response.$ref ? doc.components!.responses![response.$ref.split('/').pop()!]! : response;
}

export interface OpenApiOperation {
  operationId?: string;
  parameters?: Array<{ name: string; in: string; required?: boolean; schema?: Record<string, unknown> }>;
  requestBody?: { required?: boolean; content: Record<string, { schema: unknown }> };
  responses: Record<string, OpenApiResponse>;
  security?: unknown[];
}

const validators = new WeakMap<OpenApiDoc, { ajv: Ajv2020; compiled: Map<string, ValidateFunction> }>();

/** The documented template a concrete path matches (`/v1/artworks/7` → `/v1/artworks/{id}`), or null. */
function matchOpenApiPath(doc: OpenApiDoc, path: string): string | null {
  const bare = path.split('?', 1)[0]!;
  if (doc.paths[bare]) return bare;
  for (const template of Object.keys(doc.paths)) {
    const pattern = new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{[^}]+\\?\}/g, '[^/]+')}$`);
    if (pattern.test(bare)) return template;
  }
  return null;
}

/** Problems of one response against the document (empty when it conforms). */
export function openApiProblems(doc: OpenApiDoc, method: string, path: string, status: number, body: unknown): string[] {
  const template = matchOpenApiPath(doc, path);
  if (!template) return [`${path} matches no documented path`];
  const operation = doc.paths[template]![method.toLowerCase()];
  if (!operation) return [`${method} ${template} is not documented`];
  // OpenAPI: the status itself, else its range (`4XX`), else `default`.
  const documented = operation.responses[String(status)] ?? operation.responses[`${String(status)[0]}XX`] ?? operation.responses.default;
  const response = documented && resolveResponse(doc, documented);
  if (!response)
    return [`${method} ${template}: status ${status} is not documented (documented: ${Object.keys(operation.responses).join(', ')})`];
  const json = response.content?.['application/json'];
  if (!response.content) {
    const empty = body === undefined || body === null || body === '' || (body instanceof Uint8Array && body.length === 0);
    return empty ? [] : [`${method} ${template} ${status}: documented without content, but a body came`];
  }
  if (!json) return []; // binary / event-stream content: the status is what can be checked here
  let state = validators.get(doc);
  if (!state) {
    state = { ajv: new Ajv2020({ strict: false, validateFormats: false, allErrors: true }), compiled: new Map() };
    validators.set(doc, state);
  }
  const key = `${method} ${template} ${status}`;
  let validate = state.compiled.get(key);
  if (!validate) {
    // The response schema with the document's components beside it, so `#/components/schemas/X` resolves.
    validate = state.ajv.compile({ ...(json.schema as object), components: doc.components ?? {} });
    state.compiled.set(key, validate);
  }
  if (validate(body)) return [];
  return (validate.errors ?? [])
    .slice(0, 10)
    .map((e) => `${key}: ${e.instancePath || '(body)'} ${e.message ?? ''} ${JSON.stringify(e.params)}`);
}

/** Throw when a response does not conform to the document. */
export function validateAgainstOpenApi(doc: OpenApiDoc, method: string, path: string, status: number, body: unknown): void {
  const problems = openApiProblems(doc, method, path, status, body);
  if (problems.length) throw new Error(`response does not match the OpenAPI document:\n  ${problems.join('\n  ')}`);
}
