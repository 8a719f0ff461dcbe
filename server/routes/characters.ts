/**
 * GET /v1/characters and /v1/characters/{id}: the character knowledge base, live from its upstream
 * through the shared CharactersClient (cached ~5 min; bodies serialized once per cache entry).
 */
import { z } from 'zod';
import type { RouteModule } from '../app.ts';
import { idParam, limitParam, pageParam } from '../api.ts';
import { notFound, unconfigured } from '../errors.ts';
import {
  type CharacterInclude,
  CharacterDetail,
  CharacterListMeta,
  CharacterSummary,
  CHARACTERS_SERVICE,
  charactersClientOf,
} from '../upstream/characters.ts';

const INCLUDES: ReadonlySet<string> = new Set<CharacterInclude>(['profiles', 'codex']);

export const characterRoutes: RouteModule = (api, services) => {
  const client = () => {
    const configured = charactersClientOf(services);
    if (!configured) throw unconfigured(CHARACTERS_SERVICE);
    return configured;
  };

  api.route({
    method: 'GET',
    path: '/v1/characters',
    summary: 'List characters (lightweight fields; `fields` selects, heavy profiles never listed)',
    tag: 'characters',
    access: 'key',
    query: z.object({
      page: pageParam(),
      limit: limitParam(25),
      search: z.string().optional().describe('full-text search'),
      fields: z
        .string()
        .optional()
        .describe('comma-separated field names; unknown and heavy fields (agent_profiles, bot_profile, codex_document) are ignored; id is always included'),
    }),
    response: { json: z.object({ data: z.array(CharacterSummary), meta: CharacterListMeta }) },
    errors: [502, 503],
    async handler(ctx, { query }) {
      const body = await client().listBody({
        page: query.page,
        limit: query.limit,
        search: query.search,
        fields: query.fields?.split(','),
      });
      ctx.type = 'application/json';
      ctx.body = body.body;
    },
  });

  api.route({
    method: 'GET',
    path: '/v1/characters/{id}',
    summary: 'One character with the detail fields; include=profiles,codex adds the large extras',
    tag: 'characters',
    access: 'key',
    params: z.object({ id: idParam(10_000) }),
    query: z.object({
      include: z.string().optional().describe('comma-separated extras: profiles (agent_profiles, bot_profile), codex (codex_document)'),
    }),
    response: { json: z.object({ data: CharacterDetail }) },
    errors: [404, 502, 503],
    async handler(ctx, { params, query }) {
      const include = (query.include ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter((s): s is CharacterInclude => INCLUDES.has(s));
      const body = await client().getBody(params.id, include);
      if (!body) throw notFound(`Character ${params.id} not found`);
      ctx.type = 'application/json';
      ctx.body = body.body;
    },
  });
};
