/**
 * GET /v1/characters and /v1/characters/{id}: the character knowledge base, live from its upstream
 * through the server's one CharactersClient (cached ~5 min; bodies serialized once per cache entry).
 * A request whose answer is cached is answered from memory; a miss asks the upstream.
 */
import { z } from 'zod';
import { idParam, limitParam, pageParam, type RouteModule } from '../route-table.ts';
import { notFound, unconfigured } from '../errors.ts';
import { JSON_TYPE } from '../http-conditional.ts';
import { type CharacterInclude, CharacterDetail, CharacterListMeta, CharacterSummary, CHARACTERS_SERVICE } from '../upstream/characters.ts';

const INCLUDES: ReadonlySet<string> = new Set<CharacterInclude>(['profiles', 'codex']);

const ListQuery = z.object({
  page: pageParam(),
  limit: limitParam(25),
  search: z.string().optional().describe('full-text search'),
  fields: z
    .string()
    .optional()
    .describe(
      'comma-separated field names; unknown and heavy fields (agent_profiles, bot_profile, codex_document) are ignored; id is always ' +
        'included',
    ),
});
const DetailQuery = z.object({
  include: z.string().optional().describe('comma-separated extras: profiles (agent_profiles, bot_profile), codex (codex_document)'),
});
const CharacterId = idParam(10_000);
const listQueryOf = (query: z.output<typeof ListQuery>) => ({
  page: query.page,
  limit: query.limit,
  search: query.search,
  fields: query.fields?.split(','),
});
const includesOf = (query: z.output<typeof DetailQuery>): CharacterInclude[] =>
  (query.include ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s): s is CharacterInclude => INCLUDES.has(s));

export const characterRoutes: RouteModule = (api, { characters: configured }) => {
  const client = () => {
    if (!configured) throw unconfigured(CHARACTERS_SERVICE);
    return configured;
  };

  api.route({
    method: 'GET',
    path: '/v1/characters',
    operationId: 'listCharacters',
    summary: 'List characters (lightweight fields; `fields` selects, heavy profiles never listed)',
    tag: 'characters',
    access: 'key',
    query: ListQuery,
    response: { json: z.object({ data: z.array(CharacterSummary), meta: CharacterListMeta }) },
    errors: [502, 503],
    async handler(ctx, { query }) {
      const body = await client().listBody(listQueryOf(query));
      ctx.type = JSON_TYPE;
      ctx.body = body.body;
    },
  });

  api.route({
    method: 'GET',
    path: '/v1/characters/{id}',
    operationId: 'getCharacter',
    summary: 'One character with the detail fields; include=profiles,codex adds the large extras',
    tag: 'characters',
    access: 'key',
    params: z.object({ id: CharacterId }),
    query: DetailQuery,
    response: { json: z.object({ data: CharacterDetail }) },
    errors: [404, 502, 503],
    async handler(ctx, { params, query }) {
      const body = await client().getBody(params.id, includesOf(query));
      if (!body) throw notFound(`Character ${params.id} not found`);
      ctx.type = JSON_TYPE;
      ctx.body = body.body;
    },
  });
};
