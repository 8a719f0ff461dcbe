/**
 * GET /v1/search: one query over artworks and collections (the content snapshot, same matching as
 * the artworks list: case-insensitive substring of title or artist; collections by name, title or
 * slug) and characters (the character upstream's full-text search). The characters group is best
 * effort: an unconfigured, failing or slow upstream yields an empty group, never a failed search.
 */
import { z } from 'zod';
import { Artwork, Collection } from '../../artifacts/format.ts';
import { limitParam, type RouteModule } from '../api.ts';
import { CharacterSummary, type CharacterRecord } from '../upstream/characters.ts';

/** How long a search waits for the characters group (the upstream call itself may finish and fill the cache). */
const CHARACTERS_BUDGET_MS = 5_000;

const SearchResult = z
  .object({
    data: z.object({
      artworks: z.array(Artwork),
      collections: z.array(Collection),
      characters: z.array(CharacterSummary),
    }),
    meta: z.object({ query: z.string(), limit: z.number().int() }),
  })
  .meta({ id: 'SearchResult' });

export const searchRoutes: RouteModule = (api, { content, characters: client }) => {
  api.route({
    method: 'GET',
    path: '/v1/search',
    operationId: 'search',
    summary: 'Search artworks, collections and characters at once',
    tag: 'search',
    access: 'key',
    query: z.object({
      q: z.string().trim().min(1, 'q is required').max(200).describe('text to find'),
      limit: limitParam(10, 25),
    }),
    response: { json: SearchResult },
    errors: [400],
    async handler(ctx, { query }) {
      const { q, limit } = query;
      const needle = q.toLowerCase();
      const characters = searchCharacters(q, limit);
      const snapshot = content.snapshot;

      const artworks: Artwork[] = [];
      // As on the artworks list: the search text is `title \n artist`, so a needle with a newline
      // (which would match across the two fields) matches nothing.
      if (!needle.includes('\n')) {
        for (let i = 0; i < snapshot.artworks.length && artworks.length < limit; i++) {
          if (snapshot.artworkSearchText[i]!.includes(needle)) artworks.push(snapshot.artworks[i]!);
        }
      }
      const collections = snapshot.manifest.collections
        .filter((c) => [c.name, c.title, c.slug].some((s) => s.toLowerCase().includes(needle)))
        .slice(0, limit);

      ctx.body = { data: { artworks, collections, characters: await characters }, meta: { query: q, limit } };
    },
  });

  async function searchCharacters(q: string, limit: number): Promise<CharacterRecord[]> {
    if (!client) return [];
    try {
      const list = await client.list({ page: 1, limit, search: q }, { signal: AbortSignal.timeout(CHARACTERS_BUDGET_MS) });
      return list.data;
    } catch {
      return []; // logged by the client; search stays up
    }
  }
};
