/** GET /v1 (the index) and GET /v1/openapi.json (generated from the route declarations). */
import { z } from 'zod';
import type { RouteModule } from '../api.ts';

export const API_VERSION = '1.0.0';

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

export const metaRoutes: RouteModule = (api, { config }) => {
  let openapi: Buffer | null = null;
  const description =
    "The museum's published collections, artworks with normalized media, 3D rooms with baked wall-slot anchors, characters, search, the Library, souls, presence and the exhibition guide.";
  api.route({
    method: 'GET',
    path: '/v1',
    operationId: 'getApiIndex',
    summary: 'API index',
    tag: 'meta',
    access: 'public',
    response: { json: Index },
    handler(ctx) {
      ctx.body = {
        data: {
          name: 'Museum Art Data API',
          version: API_VERSION,
          description,
          documentation: `${config.publicUrl}/v1/openapi.json`,
          authentication:
            'Send your key as `X-API-Key: <key>` or `Authorization: Bearer <key>`. Public: GET /v1, GET /v1/rooms/{id}/slots, presence and guide routes.',
          endpoints: api.endpoints,
        },
      };
    },
  });
  api.route({
    method: 'GET',
    path: '/v1/openapi.json',
    operationId: 'getOpenApiDocument',
    summary: 'OpenAPI 3.1 description of this API',
    tag: 'meta',
    access: 'public',
    response: { json: z.record(z.string(), z.unknown()) },
    handler(ctx) {
      openapi ??= Buffer.from(
        JSON.stringify(api.openapi({ title: 'Museum Art Data API', version: API_VERSION, description, serverUrl: config.publicUrl })),
      );
      ctx.type = 'application/json';
      ctx.body = openapi;
    },
  });
};
