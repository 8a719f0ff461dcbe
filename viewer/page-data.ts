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
  /** `/v1/rooms/{id}/slots`, or null when no slot data is baked. */
  slotsUrl: string | null;
  /** The baked model variants (Room.model_variants); empty for a room baked before variants. */
  variants: ViewVariant[];
  /** The room's navmesh GLB (Room.navmesh_url, same-origin), or null: walk mode builds the floor in the page. */
  navmeshUrl: string | null;
  /** Where a visitor enters (Room.spawn, feet on the navmesh), or null. */
  spawn: [number, number, number] | null;
}

/** One baked model variant (decisions.md, "Model variants"), its URL a same-origin path. */
export interface ViewVariant {
  name: string;
  url: string;
  bytes: number;
  extensionsRequired: string[];
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

interface Draco {
  js: string;
  wasm: string;
}

/** The decoders a model may need, served by this server; each is fetched only when a model uses it. */
export interface Decoders {
  draco: Draco;
  /** three's MeshoptDecoder as an ES module (wasm inlined). */
  meshopt: string;
  /** Basis Universal transcoder (three's KTX2Loader): its JS and wasm, for KHR_texture_basisu textures. */
  basis: { js: string; wasm: string };
}

interface ModelPage {
  decoders: Decoders;
  /** The `?variant=` the page was asked for (at most VARIANT_PARAM_MAX characters), or null. */
  variant: string | null;
}

export type ViewData =
  | ({ kind: 'room'; room: ViewRoom } & ModelPage)
  | ({ kind: 'exhibition'; id: string; name: string; placements: ViewPlacement[]; presenceUrl: string } & ModelPage)
  | { kind: 'docs'; openapiUrl: string };

export const VARIANT_PARAM_MAX = 40;

/** Fastest first: meshopt decodes many times faster than Draco at a similar size on the wire; plain is large. */
const VARIANT_PREFERENCE = ['meshopt', 'draco', 'plain'];
/** Extensions whose decoder runs as WebAssembly. */
const WASM_EXTENSIONS = ['KHR_draco_mesh_compression', 'EXT_meshopt_compression', 'KHR_texture_basisu'];
export const DRACO_EXTENSION = 'KHR_draco_mesh_compression';
export const MESHOPT_EXTENSION = 'EXT_meshopt_compression';
export const BASISU_EXTENSION = 'KHR_texture_basisu';

/** The model a page shows for a room, and why it is not the one asked for (if so). */
export interface ModelChoice {
  /** The variant's name; null for a room baked before variants (its Draco or source model). */
  name: string | null;
  url: string | null;
  bytes: number | null;
  extensionsRequired: string[];
  notice: string | null;
}

/**
 * Which model to show: the `?variant=` asked for when the room has it, else the fastest variant this
 * browser can decode (no WebAssembly: only one without a decoder); a room baked before variants
 * shows its Draco model (or its source model when none was baked). Shared by the server (preload
 * hints) and the page.
 */
export function chooseModel(room: ViewRoom, asked: string | null, wasm = true): ModelChoice {
  const legacy = (notice: string | null): ModelChoice => ({
    name: null,
    url: room.modelUrl,
    bytes: null,
    extensionsRequired: room.modelOptimized ? [DRACO_EXTENSION] : [],
    notice,
  });
  if (!room.variants.length) {
    const asksOther = asked !== null && !(asked === 'draco' && room.modelOptimized);
    const shown = room.modelOptimized ? 'Draco' : 'source';
    const notice = `This room was baked before model variants: there is no "${asked}" variant, showing its ${shown} model.`;
    return legacy(asksOther && room.modelUrl ? notice : null);
  }
  const names = room.variants.map((v) => v.name);
  const found = asked === null ? undefined : room.variants.find((v) => v.name === asked);
  const loadable = room.variants.filter((v) => wasm || !v.extensionsRequired.some((x) => WASM_EXTENSIONS.includes(x)));
  const rank = (name: string) => (VARIANT_PREFERENCE.includes(name) ? VARIANT_PREFERENCE.indexOf(name) : VARIANT_PREFERENCE.length);
  const best = found ?? [...(loadable.length ? loadable : room.variants)].sort((a, b) => rank(a.name) - rank(b.name))[0]!;
  const notice =
    asked !== null && !found ? `There is no model variant "${asked}": showing ${best.name}. This room has ${names.join(', ')}.` : null;
  return { name: best.name, url: best.url, bytes: best.bytes, extensionsRequired: best.extensionsRequired, notice };
}
