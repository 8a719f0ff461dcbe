/**
 * The OpenAPI 3.1 document: well formed (every $ref resolves, every schema compiles, path parameters
 * declared, keyed routes documented with their security and 401/429), in step with the index, and
 * every registered route's real responses — successes and errors — validate against it.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FixtureBake, publishFixtureBake } from '../helpers/artifacts.ts';
import { nodeRequest, type RawResponse, rawRequest } from '../helpers/raw-http.ts';
import { type OpenApiDoc, type OpenApiOperation, openApiProblems, resolveResponse, validateAgainstOpenApi } from '../helpers/openapi.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

let server: TestServer;
let fx: FixtureBake;
let doc: OpenApiDoc;
let keyCounter = 0;
const freshKey = async () => (await server.services.keys.create(`openapi-${++keyCounter}`)).key;

beforeAll(async () => {
  server = await startTestServer();
  fx = await publishFixtureBake(server.dataDir, { extraArtworks: 30 });
  await server.services.content.reload();
  doc = (await (await server.get('/v1/openapi.json', { key: null })).json()) as OpenApiDoc;
});
afterAll(() => server.close());

const operations = () =>
  Object.entries(doc.paths).flatMap(([template, ops]) =>
    Object.entries(ops).map(([method, operation]) => ({ template, method: method.toUpperCase(), operation })),
  );

/** Send a request and validate whatever comes back against the document; returns the response. */
async function exchange(
  method: string,
  path: string,
  init: { key?: string | null; headers?: Record<string, string>; body?: unknown } = {},
): Promise<RawResponse> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.key) headers['X-API-Key'] = init.key;
  let body: string | undefined;
  if (init.body !== undefined) {
    body = JSON.stringify(init.body);
    headers['Content-Type'] = 'application/json';
  }
  const res = await nodeRequest(server.port, { method, path, headers, body, timeoutMs: 20_000 });
  const type = res.headers['content-type'] ?? '';
  const parsed = type.startsWith('application/json') && res.body.length ? JSON.parse(res.body.toString()) : res.body;
  validateAgainstOpenApi(doc, method, path, res.status, parsed);
  return res;
}

describe('the document', () => {
  it('is OpenAPI 3.1 with info, its license, a relative server, security schemes and the content routes', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc).toMatchObject({
      // OpenAPI 3.1's License Object: a name and an SPDX identifier (never also a url).
      info: { title: expect.any(String), version: '1.0.0', license: { name: expect.any(String), identifier: 'CC0-1.0' } },
      components: {
        securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' }, bearer: { type: 'http', scheme: 'bearer' } },
      },
    });
    for (const path of [
      '/v1',
      '/v1/openapi.json',
      '/v1/collections',
      '/v1/collections/{slug}',
      '/v1/artworks',
      '/v1/artworks/{id}',
      '/v1/rooms',
      '/v1/rooms/{id}/slots',
      '/files/{name}',
    ]) {
      expect(doc.paths[path]?.get, path).toBeDefined();
    }
    expect(doc.components!.schemas).toHaveProperty('RoomSlotData');
    expect(doc.components!.schemas).toHaveProperty('Artwork');
    expect((doc as unknown as { info: { license: object } }).info.license).not.toHaveProperty('url');
  });

  it("names no deployment's own address: one relative server, and the same document whatever PUBLIC_URL is", async () => {
    expect((doc as { servers?: unknown }).servers).toEqual([{ url: '/', description: expect.any(String) }]);
    expect(JSON.stringify(doc)).not.toContain('museum.test');
    const other = await startTestServer({ env: { PUBLIC_URL: 'https://elsewhere.example' } });
    try {
      const served = await (await other.get('/v1/openapi.json', { key: null })).text();
      expect(served).toBe(JSON.stringify(doc));
    } finally {
      await other.close();
    }
  });

  it('declares no component nothing uses', () => {
    const text = JSON.stringify({ paths: doc.paths, components: { ...doc.components, schemas: undefined } });
    const schemas = doc.components!.schemas!;
    const used = new Set<string>();
    const visit = (json: string) => {
      for (const [, name] of json.matchAll(/"#\/components\/schemas\/([^"]+)"/g)) {
        if (used.has(name!)) continue;
        used.add(name!);
        visit(JSON.stringify(schemas[name!]));
      }
    };
    visit(text);
    expect(Object.keys(schemas).filter((name) => !used.has(name))).toEqual([]);
    const responses = Object.keys(doc.components!.responses!);
    expect(responses.filter((name) => !text.includes(`"#/components/responses/${name}"`))).toEqual([]);
  });

  it('declares a 4XX response for every operation (/v1, /v1/openapi.json and the presence stream included)', () => {
    const without = operations().filter(({ operation }) => !Object.keys(operation.responses).some((status) => status.startsWith('4')));
    expect(without.map(({ method, template }) => `${method} ${template}`)).toEqual([]);
    for (const path of ['/v1', '/v1/openapi.json', '/v1/presence/stream']) {
      expect(doc.paths[path]!.get!.responses['4XX'], path).toEqual({ $ref: '#/components/responses/RequestError' });
    }
  });

  it("documents the collection filter (a parent slug matches its children's artworks)", () => {
    const collection = doc.paths['/v1/artworks']!.get!.parameters!.find((p) => p.name === 'collection') as { description?: string };
    expect(collection.description).toMatch(/comma-separated/);
    expect(collection.description).toMatch(/child collections/);
    expect(collection.description).toMatch(/museum collection/);
  });

  it('keeps the Artwork of the spec: the museum collection the filter matches is not a response field', () => {
    const artwork = doc.components!.schemas!.Artwork as { properties: Record<string, unknown> };
    expect(Object.keys(artwork.properties).sort()).toEqual([
      'animation',
      'artist_name',
      'collection',
      'id',
      'marketplace_url',
      'media',
      'name',
      'ratio',
    ]);
  });

  it('is internally consistent: unique operation ids, declared path parameters, resolvable $refs, compilable schemas', () => {
    const ids = operations().map((o) => o.operation.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const { template, method, operation } of operations()) {
      const declared = (operation.parameters ?? [])
        .filter((p) => p.in === 'path')
        .map((p) => p.name)
        .sort();
      const inTemplate = [...template.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
      expect(declared, `${method} ${template}`).toEqual(inTemplate);
      expect(Object.keys(operation.responses).length, `${method} ${template}`).toBeGreaterThan(0);
      if ((operation.security ?? []).length > 0) {
        expect(operation.responses, `${method} ${template}`).toHaveProperty('401');
        expect(operation.responses, `${method} ${template}`).toHaveProperty('429');
      }
    }
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"([^"]+)"/g)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThan(0);
    for (const ref of new Set(refs)) {
      const [, kind, name] = /^#\/components\/(schemas|headers|responses)\/(.+)$/.exec(ref) ?? [];
      expect(kind, ref).toBeDefined();
      expect((doc.components as Record<string, object>)[kind!], ref).toHaveProperty([name!]);
    }
    const ajv = new Ajv2020({ strict: false, validateFormats: false });
    for (const [name, schema] of Object.entries(doc.components!.schemas!)) {
      expect(() => ajv.compile({ ...(schema as object), components: doc.components }), name).not.toThrow();
    }
  });

  it('lists exactly the routes the index lists', async () => {
    const index = (await (await server.get('/v1', { key: null })).json()) as { data: { endpoints: string[] } };
    expect(
      operations()
        .map((o) => `${o.method} ${o.template}`)
        .sort(),
    ).toEqual([...index.data.endpoints].sort());
  });

  it('catches a response that does not match (the validator is not vacuous)', () => {
    expect(openApiProblems(doc, 'GET', '/v1/artworks/101', 200, { data: { id: 'one' } }).length).toBeGreaterThan(0);
    expect(openApiProblems(doc, 'GET', '/v1/rooms', 302, {}).join()).toMatch(/not documented/);
    // Any other 4XX is the 4XX range's envelope: a body that is not one does not validate.
    expect(openApiProblems(doc, 'GET', '/v1', 431, { error: 'too large' }).length).toBeGreaterThan(0);
    expect(openApiProblems(doc, 'GET', '/v1/rooms/1/slots', 404, { error: 'nope' }).length).toBeGreaterThan(0);
    expect(openApiProblems(doc, 'GET', '/v1/nothing/here', 200, {}).join()).toMatch(/no documented path/);
  });
});

interface DocumentedResponse {
  description: string;
  headers?: Record<string, { $ref: string }>;
  content?: Record<string, { schema: unknown; example?: unknown }>;
}
const responsesOf = (operation: OpenApiOperation) =>
  Object.entries(operation.responses).map(([status, response]) => [status, resolveResponse(doc, response) as DocumentedResponse] as const);

const roomExample = () => (doc.paths['/v1/rooms/{id}']!.get!.responses['200'] as DocumentedResponse).content!['application/json']!.example;

/** A schema with its `$ref`s replaced by the components they name (cycles cut at depth 20). */
function resolved(schema: unknown, depth = 0): unknown {
  if (depth > 20 || schema === null || typeof schema !== 'object') return schema;
  if (Array.isArray(schema)) return schema.map((s) => resolved(s, depth + 1));
  const ref = (schema as { $ref?: string }).$ref;
  if (ref) return resolved(doc.components!.schemas![ref.split('/').pop()!], depth + 1);
  return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, resolved(v, depth + 1)]));
}

describe('fit for code generators (decisions.md "Clients of the HTTP API")', () => {
  it('names operations for people', () => {
    const ids = Object.fromEntries(operations().map((o) => [`${o.method} ${o.template}`, o.operation.operationId]));
    expect(ids).toMatchObject({
      'GET /v1/artworks': 'listArtworks',
      'GET /v1/artworks/{id}': 'getArtwork',
      'GET /v1/rooms': 'listRooms',
      'GET /v1/rooms/{id}': 'getRoom',
      'GET /v1/rooms/{id}/slots': 'getRoomSlots',
      'GET /v1/search': 'search',
      'POST /v1/library/ask': 'askLibrary',
      'GET /v1/souls/{chainId}/{contractAddress}/{tokenId}': 'getSoul',
    });
    for (const id of Object.values(ids)) expect(id).toMatch(/^[a-z][A-Za-z]{2,30}$/);
  });

  it('gives every JSON and event-stream response an example, and every JSON example matches its schema', () => {
    const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
    const problems: string[] = [];
    for (const { template, method, operation } of operations()) {
      for (const [status, response] of responsesOf(operation)) {
        for (const [type, media] of Object.entries(response.content ?? {})) {
          const where = `${method} ${template} ${status} ${type}`;
          if (type === 'text/event-stream') {
            const frames = typeof media.example === 'string' && media.example.startsWith('data: ');
            if (!frames) problems.push(`${where}: no event-stream example`);
          } else if (type === 'application/json') {
            if (media.example === undefined) problems.push(`${where}: no example`);
            else if (!ajv.validate({ ...(media.schema as object), components: doc.components }, media.example)) {
              problems.push(`${where}: ${ajv.errorsText(ajv.errors)}`);
            }
          }
        }
      }
    }
    expect(problems).toEqual([]);
    // Real-looking values, not invented extremes.
    const room = roomExample() as { data: { id: number } };
    expect(room.data.id).toBe(1);
  });

  it('documents the response headers: request id everywhere, limits on keyed routes, Retry-After, validators where sent', () => {
    const problems: string[] = [];
    for (const { template, method, operation } of operations()) {
      const keyed = (operation.security ?? []).length > 0;
      const validated = '304' in operation.responses;
      for (const [status, response] of responsesOf(operation)) {
        const names = Object.keys(response.headers ?? {});
        const want = ['X-Request-Id'];
        // The 4XX range is answered before routing: no key was looked at, nothing counted.
        if (keyed && status !== '401' && status !== '4XX') want.push('X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset');
        if (status === '429' || status === '503') want.push('Retry-After');
        if (status === '401') want.push('WWW-Authenticate');
        if (validated && (status === '200' || status === '304')) want.push('ETag', 'Cache-Control', 'Vary');
        for (const name of want) if (!names.includes(name)) problems.push(`${method} ${template} ${status}: no ${name}`);
      }
    }
    expect(problems).toEqual([]);
    const snapshotPaths = [
      '/v1',
      '/v1/openapi.json',
      '/v1/collections',
      '/v1/artworks',
      '/v1/artworks/{id}',
      '/v1/rooms',
      '/v1/rooms/{id}',
    ];
    for (const path of [...snapshotPaths, '/v1/rooms/{id}/slots']) {
      expect(doc.paths[path]!.get!.responses, path).toHaveProperty('304');
    }
  });

  it('documents headers the server really sends', async () => {
    const sent = async (path: string, template: string, status: string, init: { key?: string | null } = {}) => {
      const res = await exchange('GET', path, init);
      expect(res.status, path).toBe(Number(status));
      const documented = responsesOf(doc.paths[template]!.get!).find(([s]) => s === status)![1];
      // Content-Encoding only when the answer is encoded.
      const expected = Object.keys(documented.headers ?? {}).filter((name) => name !== 'Content-Encoding');
      for (const name of expected) expect(res.headers, `${path} ${status} ${name}`).toHaveProperty([name.toLowerCase()]);
    };
    const keyed = [
      ['/v1/rooms', '/v1/rooms'],
      ['/v1/rooms/1', '/v1/rooms/{id}'],
      ['/v1/artworks/101', '/v1/artworks/{id}'],
    ];
    for (const [path, template] of keyed) await sent(path!, template!, '200', { key: await freshKey() });
    await sent('/v1/rooms/1/slots', '/v1/rooms/{id}/slots', '200', { key: null });
    await sent('/v1/openapi.json', '/v1/openapi.json', '200', { key: null });
    await sent('/v1/rooms', '/v1/rooms', '401', { key: null });
    await sent('/v1/rooms/424242', '/v1/rooms/{id}', '404', { key: await freshKey() });
  });

  it("types each status's error code as an enum", () => {
    const codesOf = (template: string, method: string, status: string) => {
      const response = resolveResponse(doc, doc.paths[template]![method]!.responses[status]!) as DocumentedResponse;
      const schema = resolved(response.content!['application/json']!.schema) as any;
      return schema.properties.errors.items.properties.extensions.properties.code.enum as string[];
    };
    expect(codesOf('/v1/rooms/{id}', 'get', '404')).toEqual(['NOT_FOUND']);
    expect(codesOf('/v1/rooms', 'get', '401')).toEqual(['UNAUTHORIZED']);
    expect(codesOf('/v1/rooms', 'get', '429')).toEqual(['RATE_LIMITED']);
    expect(codesOf('/v1/library/ask', 'post', '503')).toEqual(['UNCONFIGURED', 'BUSY', 'UNAVAILABLE']);
    expect(codesOf('/v1/library/ask', 'post', '502')).toEqual(['UPSTREAM']);
    expect(codesOf('/v1/search', 'get', '400')).toEqual(['BAD_REQUEST']);
    // A code outside the status's enum does not validate.
    const gone = { errors: [{ message: 'x', extensions: { code: 'GONE' } }] };
    expect(openApiProblems(doc, 'GET', '/v1/rooms/1', 404, gone).length).toBeGreaterThan(0);
  });

  it('types token_id as a string or null', () => {
    expect((doc.components!.schemas!.Room as any).properties.token_id).toMatchObject({ type: ['string', 'null'] });
  });

  it('keeps response objects open to new fields (no additionalProperties: false in any answer)', () => {
    for (const { template, method, operation } of operations()) {
      for (const [status, response] of responsesOf(operation)) {
        const schema = response.content?.['application/json']?.schema;
        if (!schema) continue;
        expect(JSON.stringify(resolved(schema)), `${method} ${template} ${status}`).not.toContain('"additionalProperties":false');
      }
    }
    const room = roomExample() as { data: object };
    const withNewField = { data: { ...room.data, opening_hours: '10-18' }, later: true };
    expect(openApiProblems(doc, 'GET', '/v1/rooms/1', 200, withNewField)).toEqual([]);
  });
});

describe('real responses of the content routes validate', () => {
  it('successes', async () => {
    const image = fx.files['room1.image']!.ref;
    for (const path of [
      '/v1',
      '/v1/openapi.json',
      '/v1/collections',
      '/v1/collections/genesis-portraits',
      '/v1/artworks',
      '/v1/artworks?collection=genesis,rooms&search=a&page=2&limit=3',
      `/v1/artworks/${fx.artworks.squareCropWithMotion}`,
      `/v1/artworks/${fx.artworks.ipfsDoublePrefix}`,
      '/v1/rooms',
      '/v1/rooms/1/slots',
      '/v1/rooms/2/slots',
      `/files/${image.sha256}.png`,
      `/files/${image.sha256}.png?width=50&format=webp`,
    ]) {
      const res = await exchange('GET', path, { key: await freshKey() });
      expect(res.status, path).toBe(200);
    }
    expect((await exchange('GET', `/files/${image.sha256}.png`, { headers: { Range: 'bytes=0-99' } })).status).toBe(206);
    const etag = (await exchange('GET', '/v1/rooms/1/slots')).headers.etag!;
    expect((await exchange('GET', '/v1/rooms/1/slots', { headers: { 'If-None-Match': etag } })).status).toBe(304);
    expect((await exchange('GET', `/files/${image.sha256}.png`, { headers: { 'If-None-Match': `"${image.sha256}"` } })).status).toBe(304);
  });

  it('errors', async () => {
    const image = fx.files['room1.image']!.ref;
    const cases: Array<[string, number, string | null, Record<string, string>?]> = [
      ['/v1/collections', 401, null],
      ['/v1/collections/nope', 404, await freshKey()],
      ['/v1/artworks', 401, `museum_${'0'.repeat(48)}`],
      ['/v1/artworks/424242', 404, await freshKey()],
      ['/v1/rooms', 401, null],
      ['/v1/rooms/3/slots', 404, null],
      [`/files/${'0'.repeat(64)}.png`, 404, null],
      [`/files/${image.sha256}.png?width=5`, 400, null],
      [`/files/${image.sha256}.png`, 416, null, { Range: 'bytes=999999999-' }],
    ];
    for (const [path, status, key, headers] of cases) {
      expect((await exchange('GET', path, { key, headers })).status, path).toBe(status);
    }
    // Refused before routing (HTTP/1.1 without Host, a header line node cannot parse): the 4XX range's envelope.
    for (const path of ['/v1', '/v1/openapi.json', '/v1/presence/stream', '/v1/rooms']) {
      for (const request of [
        `GET ${path} HTTP/1.1\r\nConnection: close\r\n\r\n`,
        `GET ${path} HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n`,
      ]) {
        const res = await rawRequest(server.port, request);
        expect(res.status, `${path}: ${JSON.stringify(request)}`).toBe(400);
        expect(res.headers['x-request-id']).toBeTruthy();
        validateAgainstOpenApi(doc, 'GET', path, res.status, JSON.parse(res.body.toString()));
      }
    }
    const { key } = await server.services.keys.create('openapi-exhausted');
    await Promise.all(Array.from({ length: 120 }, () => server.get('/v1/rooms', { key })));
    expect((await exchange('GET', '/v1/rooms', { key })).status).toBe(429);
  });
});

describe('real responses of every registered route validate', () => {
  const examples: Record<string, string> = {
    id: '1',
    slug: 'genesis',
    chainId: '1',
    contractAddress: `0x${'ab'.repeat(20)}`,
    tokenId: '1',
  };

  /** A body that satisfies a simple JSON schema (for POST routes of any group). */
  function sample(schema: unknown, depth = 0): unknown {
    let s = schema as Record<string, unknown>;
    const ref = s?.$ref as string | undefined;
    if (ref) s = doc.components!.schemas![ref.split('/').pop()!] as Record<string, unknown>;
    if (!s || depth > 6) return null;
    if ('const' in s) return s.const;
    if (Array.isArray(s.enum)) return s.enum[0];
    for (const k of ['anyOf', 'oneOf'] as const) if (Array.isArray(s[k])) return sample((s[k] as unknown[])[0], depth + 1);
    const type = Array.isArray(s.type) ? s.type[0] : s.type;
    if (type === 'object') {
      const props = (s.properties ?? {}) as Record<string, unknown>;
      return Object.fromEntries(((s.required as string[]) ?? []).map((name) => [name, sample(props[name], depth + 1)]));
    }
    if (type === 'array') return Array.from({ length: Number(s.minItems ?? 0) }, () => sample(s.items, depth + 1));
    if (type === 'integer' || type === 'number') return typeof s.minimum === 'number' ? s.minimum : 1;
    if (type === 'boolean') return false;
    if (type === 'string') return typeof s.pattern === 'string' ? 'x' : 'museum test';
    return null;
  }

  it('for each operation: a keyed/valid request, an unknown id or missing key, and an empty body', async () => {
    const image = fx.files['room1.image']!.ref;
    const fill = (template: string, override: Record<string, string> = {}) =>
      template.replace(/\{(\w+)\}/g, (_, name: string) =>
        encodeURIComponent(override[name] ?? (name === 'name' ? `${image.sha256}.png` : (examples[name] ?? '1'))),
      );
    const problems: string[] = [];
    for (const { template, method, operation } of operations()) {
      const keyed = (operation.security ?? []).length > 0;
      const bodySchema = operation.requestBody?.content['application/json']?.schema;
      const attempts: Array<{ path: string; key: string | null; body?: unknown }> = [
        { path: fill(template), key: await freshKey(), body: bodySchema ? sample(bodySchema) : undefined },
      ];
      if (keyed) attempts.push({ path: fill(template), key: null, body: bodySchema ? {} : undefined });
      if (template.includes('{'))
        attempts.push({ path: fill(template, { id: '999999', slug: 'no-such-slug', tokenId: '999999' }), key: await freshKey() });
      if (bodySchema) attempts.push({ path: fill(template), key: await freshKey(), body: {} });
      for (const attempt of attempts) {
        try {
          await exchange(method, attempt.path, { key: attempt.key, body: attempt.body });
        } catch (err) {
          problems.push(`${method} ${attempt.path}: ${(err as Error).message}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });
});
