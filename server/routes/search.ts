/**
 * GET /v1/search: one query over artworks and collections (the content snapshot, same matching as
 * the artworks list: case-insensitive substring of title or artist; collections by name, title or
 * slug) and characters (the character upstream's full-text search). The characters group is best
 * effort: an unconfigured, failing or slow upstream yields an empty group, never a failed search, and
 * `meta.unavailable` says which group is missing and why (an empty group alone would read as "no match").
 */
import { z } from 'zod';
import { Artwork, Collection } from '../../artifacts/format.ts';
import { limitParam, type RouteModule } from '../route-table.ts';
import { CharacterSummary, type CharacterRecord } from '../upstream/characters.ts';

/** How long a search waits for the characters group (the upstream call itself may finish and fill the cache). */
const CHARACTERS_BUDGET_MS = 5_000;

const UnavailableGroup = z
  .object({
    group: z.enum(['characters']),
    reason: z
      .enum(['UNCONFIGURED', 'UPSTREAM'])
      .describe('UNCONFIGURED: this deployment has no such upstream; UPSTREAM: it failed or was too slow'),
    message: z.string(),
  })
  .meta({ id: 'SearchUnavailableGroup' });
type UnavailableGroup = z.infer<typeof UnavailableGroup>;

const CHARACTERS_UNCONFIGURED: UnavailableGroup = {
  group: 'characters',
  reason: 'UNCONFIGURED',
  message: 'No character upstream is configured on this deployment',
};
const CHARACTERS_FAILED: UnavailableGroup = {
  group: 'characters',
  reason: 'UPSTREAM',
  message: 'The character upstream failed or did not answer in time',
};

/** The characters group, or why it is missing. */
type CharactersGroup = { found: CharacterRecord[] } | { unavailable: UnavailableGroup };

const SearchResult = z
  .object({
    data: z.object({
      artworks: z.array(Artwork),
      collections: z.array(Collection),
      characters: z.array(CharacterSummary),
    }),
    meta: z.object({
      query: z.string(),
      limit: z.number().int(),
      unavailable: z
        .array(UnavailableGroup)
        .optional()
        .describe('present when a group could not be searched: its list is then empty because it is missing, not because nothing matched'),
    }),
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

      const group = await characters;
      const found = 'found' in group ? group.found : [];
      const unavailable = 'unavailable' in group ? { unavailable: [group.unavailable] } : {};
      ctx.body = { data: { artworks, collections, characters: found }, meta: { query: q, limit, ...unavailable } };
    },
  });

  async function searchCharacters(q: string, limit: number): Promise<CharactersGroup> {
    if (!client) return { unavailable: CHARACTERS_UNCONFIGURED };
    try {
      const list = await client.list({ page: 1, limit, search: q }, { signal: AbortSignal.timeout(CHARACTERS_BUDGET_MS) });
      return { found: list.data };
    } catch {
      // Logged by the client; the search stays up and says what is missing.
      return { unavailable: CHARACTERS_FAILED };
    }
  }
};
