/**
 * GET /v1 (the index) and GET /v1/openapi.json (generated from the route declarations). Both are
 * fixed for the life of the process: built on first request (every route is registered by then) as
 * snapshot responses (strong ETag, 304, br/gzip compressed once).
 */
import { z } from 'zod';
import type { RouteModule } from '../route-table.ts';
import type { OpenApiInfo } from '../openapi.ts';
import { PUBLIC_CACHE_CONTROL, SnapshotResponse } from '../snapshot-response.ts';

const API_VERSION = '1.0.0';
const API_NAME = 'Museum Art Data API';
const DESCRIPTION =
  "The museum's published collections, artworks with normalized media, 3D rooms with baked wall-slot anchors, characters, search, the " +
  'Library, souls, presence and the exhibition guide.';

/**
 * What the document says about itself. The same on every deployment (it names no server of its
 * own): the license is the API description's, so clients may be generated from it freely; the
 * museum's content (artwork media, room models, images) keeps its own rights.
 */
const OPENAPI_INFO: OpenApiInfo = {
  title: API_NAME,
  version: API_VERSION,
  description:
    `${DESCRIPTION} Positions, orientations and sizes of rooms and slots are in the glTF scene's frame (right-handed, +Y up, ` +
    'metres). This description is CC0 1.0; artwork media, room models and images keep their own rights.',
  license: { name: 'CC0 1.0 Universal (this API description)', identifier: 'CC0-1.0' },
};

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

const publicResponse = { cacheControl: PUBLIC_CACHE_CONTROL };

export const metaRoutes: RouteModule = (api, { config }) => {
  let index: SnapshotResponse | undefined;
  let openapi: SnapshotResponse | undefined;
  const indexResponse = () =>
    (index ??= SnapshotResponse.of(
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
      publicResponse,
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
    handler: (ctx) => indexResponse().responseTo(ctx.req),
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
    handler: (ctx) => (openapi ??= SnapshotResponse.of(api.openapi(OPENAPI_INFO), publicResponse)).responseTo(ctx.req),
  });
};
