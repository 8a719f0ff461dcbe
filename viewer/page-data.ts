/**
 * What the server embeds in a viewer page (a `<script type="application/json" id="view-data">`,
 * never executed) for the browser bundle to read: the one contract between server/view and
 * viewer/. Everything else the page loads through the public routes any client uses
 * (`/v1/rooms/{id}/slots`, `/files/…`, `/v1/presence/stream`). URLs are same-origin paths.
 */

export interface ViewRoom {
  id: number;
  title: string;
  architect: string;
  /** The optimized GLB when baked, else the source GLB; null when the room has no model. */
  modelUrl: string | null;
  modelOptimized: boolean;
  /** The source model (for benchmarks and comparison). */
  sourceModelUrl: string | null;
  /** sha256 of the room's current source model: slot data for another model is stale. */
  modelSha256: string | null;
  /** `/v1/rooms/{id}/slots`, or null when no slot data is baked. */
  slotsUrl: string | null;
}

export interface ViewArtwork {
  /** Museum artwork id; null for a work the museum does not know. */
  id: number | null;
  title: string;
  artist: string | null;
  /** width / height; the picture is letterboxed into its frame by it. */
  ratio: number;
  /** The same-origin texture variant, or null when the museum has no still image for it. */
  textureUrl: string | null;
}

export interface ViewPlacement {
  uid: string;
  title: string;
  /** Null when the museum does not know the room. */
  room: ViewRoom | null;
  /** In hanging order: artwork k goes on the slot with index k. */
  artworks: ViewArtwork[];
}

export interface Draco {
  js: string;
  wasm: string;
}

export type ViewData =
  | { kind: 'room'; draco: Draco; room: ViewRoom }
  | { kind: 'exhibition'; draco: Draco; id: string; name: string; placements: ViewPlacement[]; presenceUrl: string }
  | { kind: 'docs'; openapiUrl: string };
