/**
 * A ready exhibition for `museum serve --dev-key` (`make run`): a newcomer gets a link to open
 * beside the development key. It is registered once, under a fixed id, through the server's own
 * registration route (the same validation, context building, quota and starters as any client's);
 * later starts find it and only print its link, so a restart never adds a second one. It hangs the
 * published artworks that have pictures the museum serves itself (the sample's), else any with an
 * image, on the first rooms with slots.
 */
import type { Artwork } from '../artifacts/format.ts';
import { printable } from '../common/terminal.ts';
import type { MuseumServer } from './app.ts';
import type { ContentSnapshot } from './content.ts';

const SAMPLE_EXHIBITION_ID = 'sample';
const SAMPLE_EXHIBITION_NAME = 'A first visit';
/** Rooms the exhibition walks through, at most. */
const MAX_ROOMS = 3;

interface Placement {
  uid: string;
  room: { id: number; title: string };
  artworks: Array<{ id: number }>;
}
interface SampleExhibitionDocument {
  format: 'museum-exhibition@1';
  id: string;
  name: string;
  placements: Placement[];
}

/** The museum-exhibition@1 document, or null when the bake has no room with slots or no pictured artwork. */
function sampleExhibition(snapshot: ContentSnapshot): SampleExhibitionDocument | null {
  const stored = new Set(snapshot.manifest.artworks.filter((a) => a.media_file).map((a) => a.id));
  const pictured = (a: Artwork) => a.media?.type === 'image';
  const works = stored.size > 0 ? snapshot.artworks.filter((a) => stored.has(a.id)) : snapshot.artworks.filter(pictured);
  const placements: Placement[] = [];
  let next = 0;
  for (const room of snapshot.manifest.rooms) {
    const slots = room.slot_summary?.count ?? 0;
    if (slots === 0 || next >= works.length || placements.length === MAX_ROOMS) continue;
    const hung = works.slice(next, next + slots);
    next += hung.length;
    placements.push({ uid: `room-${room.id}`, room: { id: room.id, title: room.title }, artworks: hung.map((a) => ({ id: a.id })) });
  }
  return placements.length ? { format: 'museum-exhibition@1', id: SAMPLE_EXHIBITION_ID, name: SAMPLE_EXHIBITION_NAME, placements } : null;
}

export type SampleExhibitionOutcome = { link: string; registered: boolean } | { link: null; reason: string };

/**
 * The sample exhibition's link, registering it first when it is not there (a fresh state store, or
 * after it expired). Never throws: a server that cannot register it still serves.
 */
export async function ensureSampleExhibition(server: MuseumServer): Promise<SampleExhibitionOutcome> {
  const link = `${server.url}/view/exhibitions/${SAMPLE_EXHIBITION_ID}`;
  try {
    if (await server.services.guide.exhibitions.get(SAMPLE_EXHIBITION_ID)) return { link, registered: false };
    const doc = sampleExhibition(server.services.content.snapshot);
    if (!doc) return { link: null, reason: 'nothing baked with slots and pictures yet (make bake)' };
    const res = await fetch(`${server.url}/v1/guide/exhibitions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(doc),
      signal: AbortSignal.timeout(10_000),
    });
    if (res.status !== 200) {
      const body = (await res.json().catch(() => null)) as { errors?: Array<{ message?: string }> } | null;
      const message = body?.errors?.[0]?.message;
      return { link: null, reason: `registration answered ${res.status}${message ? ` (${message})` : ''}` };
    }
    return { link, registered: true };
  } catch (err) {
    return { link: null, reason: err instanceof Error ? err.message : String(err) };
  }
}

/** The line `museum serve --dev-key` prints beside the development key. */
export async function sampleExhibitionLine(server: MuseumServer): Promise<string> {
  const outcome = await ensureSampleExhibition(server);
  if ('reason' in outcome) return `museum: no sample exhibition: ${printable(outcome.reason)}`;
  return `museum: open   ${outcome.link} (sample exhibition${outcome.registered ? ', registered now' : ''})`;
}
