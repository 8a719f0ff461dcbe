/**
 * The museum API's typed client: openapi-fetch over the types openapi-typescript generated from
 * GET /v1/openapi.json (client/schema.d.ts; `make client` regenerates them). Every path, parameter,
 * body and answer is typed by the document, so a call that the API would refuse does not compile.
 *
 *   const museum = createMuseumClient('https://museum.example', process.env.MUSEUM_KEY);
 *   const { data, error, response } = await museum.GET('/v1/rooms/{id}', { params: { path: { id: 1 } } });
 *   if (data) console.log(data.data.title); else console.error(response.status, error?.errors[0]?.extensions.code);
 */
import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { paths } from './schema.d.ts';

export type { components, operations, paths } from './schema.d.ts';
export type MuseumClient = Client<paths>;

/**
 * A client of the museum at `baseUrl` (its origin, e.g. `https://museum.example`), sending `key` as
 * `X-API-Key` when given (the public routes need none). `options` go to openapi-fetch (a custom
 * `fetch`, more headers…).
 */
export function createMuseumClient(baseUrl: string, key?: string, options: Omit<ClientOptions, 'baseUrl'> = {}): MuseumClient {
  const headers = new Headers(options.headers as ConstructorParameters<typeof Headers>[0]);
  if (key) headers.set('X-API-Key', key);
  return createClient<paths>({ ...options, baseUrl, headers });
}
