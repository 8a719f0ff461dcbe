/**
 * GET /v1 (the index) and GET /v1/openapi.json (generated from the route declarations). Both are
 * fixed for the life of the process: built on first request (every route is registered by then) as
 * snapshot answers (strong ETag, 304, br/gzip compressed once).
 */
import { z } from 'zod';
import type { RouteTable, RouteModule } from '../route-table.ts';
import type { OpenApiInfo } from '../openapi.ts';
import { PUBLIC_CACHE_CONTROL, SnapshotAnswer } from '../snapshot-answer.ts';

const API_VERSION = '1.0.0';
const API_NAME = 'Museum Art Data API';
const DESCRIPTION =
  "The museum's published collections, artworks with normalized media, 3D rooms with baked wall-slot anchors, characters, search, the " +
  'Library, souls, presence and the exhibition guide.';

/** What the document says about itself; `publicUrl` is offered as a second server beside this origin. */
const openApiInfo = (publicUrl: string): OpenApiInfo => ({
  title: API_NAME,
  version: API_VERSION,
  description: DESCRIPTION,
  publicUrl,
});

/** The OpenAPI document of a route table, as GET /v1/openapi.json serves it. */
const openApiDocument = (api: RouteTable, publicUrl: string) => api.openapi(openApiInfo(publicUrl));

const Index = z.object({
  data: z.object({
    name: z.string(),
    version: z.string(),
    description: z.string(),
    documentation: z.string(),
    authentication: z.string(),
    endpoints: z.array(z.string()),
  }),
});

const publicAnswer = { cacheControl: PUBLIC_CACHE_CONTROL };

export const metaRoutes: RouteModule = (api, { config }) => {
  let index: SnapshotAnswer | undefined;
  let openapi: SnapshotAnswer | undefined;
  const indexAnswer = () =>
    (index ??= SnapshotAnswer.of(
      {
        data: {
          name: API_NAME,
          version: API_VERSION,
          description: DESCRIPTION,
          documentation: `${config.publicUrl}/v1/openapi.json`,
          authentication:
            'Send your key as `X-API-Key: <key>` or `Authorization: Bearer <key>`. Public: GET /v1, GET /v1/rooms/{id}/slots, presence ' +
            'and guide routes.',
          endpoints: api.endpoints,
        },
      },
      publicAnswer,
    ));
  api.route({
    method: 'GET',
    path: '/v1',
    operationId: 'getApiIndex',
    summary: 'API index',
    tag: 'meta',
    access: 'public',
    response: { json: Index, precompressed: true },
    errors: [304],
    handler: (ctx) => indexAnswer().answer(ctx.req),
  });
  api.route({
    method: 'GET',
    path: '/v1/openapi.json',
    operationId: 'getOpenApiDocument',
    summary: 'OpenAPI 3.1 description of this API',
    tag: 'meta',
    access: 'public',
    response: { json: z.record(z.string(), z.unknown()), precompressed: true },
    errors: [304],
    handler: (ctx) => (openapi ??= SnapshotAnswer.of(openApiDocument(api, config.publicUrl), publicAnswer)).answer(ctx.req),
  });
};
