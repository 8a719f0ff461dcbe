/**
 * Guide exhibitions: the `museum-exhibition@1` registration document (validated strictly) and the
 * GuideContext built from it and the museum's own baked content. Where they are stored (and the
 * ownership, size, quota and expiry rules): server/state/exhibitions.ts.
 *
 * Validation: ids, bounds and types are checked by zod; strings carrying control characters or
 * markup, strings over 1,000 characters and bodies nested deeper than any real document are
 * refused (400, nothing stored); accepted strings are clamped to display lengths. Unknown keys
 * are dropped: the document may carry more than the guide reads.
 */
import { z } from 'zod';
import type { ContentSnapshot } from '../content.ts';
import { clamp, CONTROL_CHARS, MARKUP, sha256Hex } from './text.ts';

const EXHIBITION_FORMAT = 'museum-exhibition@1';
export const EXHIBITION_ID = /^[\w.:-]{1,64}$/;
export const LIMITS = {
  placements: 60,
  artworksPerPlacement: 256,
  /** Across all placements (decisions.md): bounds what the guide's prompts and pages carry. */
  artworks: 2_000,
  /** Longest string accepted anywhere in the document (longer ones are refused, not clamped). */
  string: 1_000,
  /** Deepest nesting accepted (a real document is 5 levels deep). */
  depth: 12,
} as const;
/** Display lengths strings are clamped to. */
const CLAMP = { name: 120, title: 160, artist: 120, generator: 120, uid: 128, description: 600, collection: 120 } as const;

const clampedText = (max: number, what: string) =>
  z
    .string()
    .max(LIMITS.string, `${what} is longer than ${LIMITS.string} characters`)
    .refine((s) => !CONTROL_CHARS.test(s), `${what} contains control characters`)
    .refine((s) => !MARKUP.test(s), `${what} contains markup`)
    .transform((s) => clamp(s.replace(/\s+/g, ' ').trim(), max));
const positiveId = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

const ArtworkRef = z.object({
  id: positiveId,
  name: clampedText(CLAMP.title, 'artwork name').nullable().optional(),
  artist: clampedText(CLAMP.artist, 'artist').nullable().optional(),
});

const Placement = z.object({
  uid: clampedText(CLAMP.uid, 'placement uid').refine((s) => s.length > 0, 'placement uid must not be empty'),
  room: z.object({ id: positiveId, title: clampedText(CLAMP.title, 'room title') }),
  artworks: z.array(ArtworkRef).max(LIMITS.artworksPerPlacement, `at most ${LIMITS.artworksPerPlacement} artworks per placement`),
});

export const ExhibitionDocument = z
  .object({
    format: z.literal(EXHIBITION_FORMAT),
    id: z.string().regex(EXHIBITION_ID, '1-64 word characters, dots, colons or hyphens'),
    name: clampedText(CLAMP.name, 'name').refine((s) => s.length > 0, 'name must not be empty'),
    generator: clampedText(CLAMP.generator, 'generator').optional(),
    placements: z.array(Placement).max(LIMITS.placements, `at most ${LIMITS.placements} placements`),
  })
  .superRefine((doc, ctx) => {
    const seen = new Set<string>();
    doc.placements.forEach((p, i) => {
      if (seen.has(p.uid)) ctx.addIssue({ code: 'custom', path: ['placements', i, 'uid'], message: 'placement uids must be unique' });
      seen.add(p.uid);
    });
    const artworks = doc.placements.reduce((sum, p) => sum + p.artworks.length, 0);
    if (artworks > LIMITS.artworks)
      ctx.addIssue({ code: 'custom', path: ['placements'], message: `at most ${LIMITS.artworks} artworks in all (${artworks} given)` });
  })
  .meta({ id: 'ExhibitionDocument', description: 'museum-exhibition@1: what the guide reads of an exhibition (other keys are ignored)' });
export type ExhibitionDocument = z.output<typeof ExhibitionDocument>;

// ---------------------------------------------------------------------------------------------
// The context (spec: GuideContext, GuideContextRoom, GuideContextArtwork)

const GuideContextRoom = z
  .object({
    uid: z.string().describe('placement uid'),
    id: z.number().int().describe('museum room id'),
    title: z.string(),
    architect: z.string().nullable(),
    description: z.string().nullable(),
    series: z.string().nullable(),
  })
  .meta({ id: 'GuideContextRoom' });
type GuideContextRoom = z.infer<typeof GuideContextRoom>;

const GuideContextArtwork = z
  .object({
    id: z.number().int().nullable().describe('museum artwork id, when the museum knows the work'),
    title: z.string(),
    artist: z.string().nullable(),
    description: z.string().nullable().describe('clamped'),
    collection: z.string().nullable().describe('title of the museum collection (or the marketplace slug)'),
    roomUid: z.string().describe('placement uid of the room it hangs in'),
  })
  .meta({ id: 'GuideContextArtwork' });
type GuideContextArtwork = z.infer<typeof GuideContextArtwork>;

export const GuideContext = z
  .object({
    id: z.string(),
    name: z.string(),
    registeredAt: z.string().describe('ISO 8601, first registration'),
    updatedAt: z.string().describe('ISO 8601, last change of content, enrichment or starters'),
    generator: z.string().nullable(),
    artists: z.array(z.string()).describe('distinct exhibited artist names'),
    architects: z.array(z.string()).describe('distinct room architect names'),
    starters: z.array(z.string()).describe('suggested visitor questions, filled asynchronously after registration'),
    rooms: z.array(GuideContextRoom),
    artworks: z.array(GuideContextArtwork),
  })
  .meta({ id: 'GuideContext' });
export type GuideContext = z.infer<typeof GuideContext>;

const distinct = (values: Array<string | null>): string[] => [...new Set(values.filter((v): v is string => !!v))];
const orNull = (s: string | undefined | null, max: number): string | null => (s?.trim() ? clamp(s.trim(), max) : null);

/** The context of a document, enriched from the museum's baked content (rooms, artworks, collections). */
export function buildContext(
  doc: ExhibitionDocument,
  snapshot: ContentSnapshot,
  times: { registeredAt: string; updatedAt: string },
  starters: string[] = [],
): GuideContext {
  const rooms: GuideContextRoom[] = doc.placements.map((p) => {
    const known = snapshot.roomsById.get(p.room.id);
    return {
      uid: p.uid,
      id: p.room.id,
      title: orNull(known?.title, CLAMP.title) ?? p.room.title,
      architect: orNull(known?.architect, CLAMP.name),
      description: orNull(known?.description, CLAMP.description),
      series: orNull(known?.series, CLAMP.name),
    };
  });
  const artworks: GuideContextArtwork[] = [];
  for (const p of doc.placements) {
    const seen = new Set<number>();
    for (const ref of p.artworks) {
      if (seen.has(ref.id)) continue;
      seen.add(ref.id);
      const known = snapshot.artworksById.get(ref.id);
      const museumCollection = known ? snapshot.museumCollectionOf.get(known.id) : undefined;
      const collection = museumCollection ? snapshot.collectionsBySlug.get(museumCollection) : undefined;
      const description = (known as { description?: unknown } | undefined)?.description;
      artworks.push({
        id: known ? known.id : null,
        title: orNull(known?.name, CLAMP.title) ?? ref.name ?? 'Untitled',
        artist: orNull(known?.artist_name, CLAMP.artist) ?? ref.artist ?? null,
        description: typeof description === 'string' ? orNull(description, CLAMP.description) : null,
        collection: orNull(collection?.title ?? known?.collection, CLAMP.collection),
        roomUid: p.uid,
      });
    }
  }
  return {
    id: doc.id,
    name: doc.name,
    registeredAt: times.registeredAt,
    updatedAt: times.updatedAt,
    generator: doc.generator ?? null,
    artists: distinct(artworks.map((a) => a.artist)),
    architects: distinct(rooms.map((r) => r.architect)),
    starters,
    rooms,
    artworks,
  };
}

export const contentHashOf = (doc: ExhibitionDocument): string => sha256Hex(JSON.stringify(doc));
