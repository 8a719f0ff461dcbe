/**
 * The artifact format: the one contract between the bake (writer) and the server (reader).
 * Paths, RoomSlotData, the manifest and the public resource shapes are defined here once,
 * as zod schemas, and both sides import them (the server also builds its OpenAPI from them).
 */
import { join } from 'node:path';
import { z } from 'zod';

// ---------------------------------------------------------------------------------------------
// Slot data (RoomSlot / RoomSlotData, spec + decisions)

/** Schema version of RoomSlotData (decisions: `version` is the schema version, 1). */
export const SLOT_DATA_VERSION = 1 as const;

// The slot contract of the models (spec: "Slot_NNN" placeholders; decisions: `Auto_NNN` generated
// anchors embedded in the optimized GLB). The engine, the optimizer and the sample builder use these.

/** Material of slot placeholder quads, authored and embedded. */
export const SLOT_MATERIAL_NAME = 'Slot Placeholder';
/** Node names recognised as placeholders: `Slot_12`, `slot_0007`, `Auto_003`, Blender's `Slot_003.001`. */
export const SLOT_NAME_PATTERN = /^(slot|auto)_(\d+)(?:\.\d+)?$/i;
/** Canonical slot ids as published (JSON and node names of the optimized GLB). */
const SLOT_ID_PATTERN = /^(Slot|Auto)_\d{3,}$/;
/** Name of the quad meshes the embedded `Auto_NNN` nodes instance (one per frame size). */
export const SLOT_QUAD_MESH_NAME = 'Auto Slot Quad';
export const slotId = (prefix: 'Slot' | 'Auto', n: number): string => `${prefix}_${String(n).padStart(3, '0')}`;

/** `Slot Placeholder`, any case, `_` or space, with or without Blender's `.001` suffix. */
export function isSlotMaterialName(name: string | null | undefined): boolean {
  if (!name) return false;
  const wanted = SLOT_MATERIAL_NAME.toLowerCase().replace(/[ _]/g, '');
  return (
    name
      .trim()
      .toLowerCase()
      .replace(/\.\d+$/, '')
      .replace(/[ _]/g, '') === wanted
  );
}

const Vec3 = z.tuple([z.number(), z.number(), z.number()]);
const Quat = z.tuple([z.number(), z.number(), z.number(), z.number()]);
type Vec3 = z.infer<typeof Vec3>;
type Quat = z.infer<typeof Quat>;

export const RoomSlot = z
  .object({
    id: z.string().regex(SLOT_ID_PATTERN).describe('Slot_NNN (authored node) or Auto_NNN (generated)'),
    index: z.number().int().min(1).describe('1-based slot number'),
    source: z.enum(['authored', 'generated']),
    position: Vec3.describe('anchor centre, room-local'),
    quaternion: Quat.describe('orientation [x,y,z,w]; local +Z = facing, +Y = upright'),
    width: z.number().positive(),
    height: z.number().positive(),
    facing: Vec3.describe('unit vector equal to the quaternion +Z'),
    flipped: z.boolean().describe('authored normal pointed into the wall and was flipped'),
    ambiguous: z.boolean().describe('evidence could not decide; the interior tie-break did'),
    // Optional measured facts (additions allowed by the issue; the seed fields keep their meaning).
    clearance: z
      .object({ front: z.number(), back: z.number() })
      .optional()
      .describe('open distance in metres measured by the probes in front of / behind the frame'),
    evidence: z.string().optional().describe('which evidence decided the facing'),
  })
  .meta({ id: 'RoomSlot' });
export type RoomSlot = z.infer<typeof RoomSlot>;

export const SlotShortfall = z.object({
  expected: z.number().int().min(0),
  placed: z.number().int().min(0),
  reason: z.string(),
});
export type SlotShortfall = z.infer<typeof SlotShortfall>;

export const RoomSlotData = z
  .object({
    version: z.literal(SLOT_DATA_VERSION),
    room: z.number().int(),
    model: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .describe('sha256 of the source model file (behind model_url)'),
    generated_at: z.string(),
    algorithm: z.string().describe('slot algorithm revision; changes whenever its output can change'),
    slots: z.array(RoomSlot),
    onchain_slots: z.number().int().min(0).optional(),
    shortfall: SlotShortfall.nullable().optional(),
    warnings: z.array(z.string()).optional(),
  })
  .meta({ id: 'RoomSlotData' });
export type RoomSlotData = z.infer<typeof RoomSlotData>;

// ---------------------------------------------------------------------------------------------
// Public content shapes (spec: Collection, Media, Artwork)

const CollectionRef = z.object({ id: z.number().int(), name: z.string(), slug: z.string() });
export const Collection = z
  .object({
    id: z.number().int(),
    name: z.string(),
    title: z.string(),
    description: z.string(),
    slug: z.string(),
    parent_collection: CollectionRef.nullable(),
    child_collections: z.array(CollectionRef),
  })
  .meta({ id: 'Collection' });
export type Collection = z.infer<typeof Collection>;

export const Media = z
  .object({
    url: z.string(),
    type: z.string(),
    content_type: z.string(),
    width: z.number().int().nullable(),
    height: z.number().int().nullable(),
  })
  .meta({ id: 'Media' });
export type Media = z.infer<typeof Media>;

export const Artwork = z
  .object({
    id: z.number().int(),
    name: z.string(),
    artist_name: z.string(),
    collection: z.string(),
    media: Media.nullable(),
    animation: Media.nullable(),
    ratio: z.number().positive(),
    marketplace_url: z.string(),
  })
  .meta({ id: 'Artwork' });
export type Artwork = z.infer<typeof Artwork>;

/** The model variants a room is baked in (decisions, "Model variants"); `draco` is model_optimized itself. */
const MODEL_VARIANT_NAMES = ['draco', 'meshopt', 'plain'] as const;
type ModelVariantName = (typeof MODEL_VARIANT_NAMES)[number];

/** What a loader must support, and the longest texture side: read back from the written GLB. */
export const ModelVariantFacts = z.object({
  extensions_required: z.array(z.string()).describe("exactly the GLB's extensionsRequired"),
  max_texture_size: z.number().int().positive().nullable().describe('longest texture side in pixels; null: no textures'),
});
export type ModelVariantFacts = z.infer<typeof ModelVariantFacts>;

const RoomModelVariant = ModelVariantFacts.extend({
  name: z
    .enum(MODEL_VARIANT_NAMES)
    .describe(
      'draco: model_optimized_url itself (KHR_draco_mesh_compression); meshopt: EXT_meshopt_compression + KHR_mesh_quantization; ' +
        'plain: float32 geometry, no compression, textures at most 1024 px (loads with no decoder)',
    ),
  url: z.string(),
  bytes: z.number().int().min(0).describe('bytes of the file (identity); /files sends it br/gzip-encoded when the client accepts it'),
}).meta({ id: 'RoomModelVariant' });
type RoomModelVariant = z.infer<typeof RoomModelVariant>;

/** The public Room (spec's twelve fields, meanings unchanged) plus its model variants. */
export const Room = z
  .object({
    id: z.number().int(),
    title: z.string(),
    architect: z.string(),
    description: z.string(),
    series: z.string(),
    slots: z.number().int(),
    token_id: z.string().nullable().describe('the room token id in decimal (a string: token ids exceed 2^53), or null'),
    image_url: z.string().nullable(),
    thumbnail_url: z.string().nullable(),
    model_url: z.string().nullable(),
    model_optimized_url: z.string().nullable(),
    slot_data_url: z.string().nullable(),
    model_variants: z
      .array(RoomModelVariant)
      .describe('the optimized model in each variant a client can pick from (every one carries the same Slot_/Auto_ anchor nodes)')
      .meta({
        example: [
          {
            name: 'draco',
            url: 'https://museum.example/files/<sha256>.glb',
            bytes: 124_000,
            extensions_required: ['KHR_draco_mesh_compression', 'EXT_texture_webp'],
            max_texture_size: 2048,
          },
          {
            name: 'meshopt',
            url: 'https://museum.example/files/<sha256>.glb',
            bytes: 180_000,
            extensions_required: ['EXT_meshopt_compression', 'KHR_mesh_quantization', 'EXT_texture_webp'],
            max_texture_size: 2048,
          },
          {
            name: 'plain',
            url: 'https://museum.example/files/<sha256>.glb',
            bytes: 410_000,
            extensions_required: ['EXT_texture_webp'],
            max_texture_size: 1024,
          },
        ],
      }),
  })
  .meta({ id: 'Room' });
export type Room = z.infer<typeof Room>;

/**
 * An artwork as the manifest keeps it: the public Artwork plus the slug of its museum collection
 * (the content store's `collection_type`), which the artworks list's `collection` filter matches.
 * The server strips it from responses; manifests written before it existed read as null.
 */
export const ManifestArtwork = Artwork.extend({
  museum_collection: z.string().nullable().default(null),
  /** The still when the bake stored it (a content file): media.url is then `/files/<name>`, made absolute by the server. */
  media_file: z.lazy(() => FileRef).optional(),
});
export type ManifestArtwork = z.infer<typeof ManifestArtwork>;

// ---------------------------------------------------------------------------------------------
// Content-addressed files and the manifest

export const FILE_EXTENSIONS = {
  glb: 'model/gltf-binary',
  webp: 'image/webp',
  png: 'image/png',
  jpg: 'image/jpeg',
  avif: 'image/avif',
  svg: 'image/svg+xml',
  json: 'application/json',
  html: 'text/html; charset=utf-8',
} as const;
export type FileExt = keyof typeof FILE_EXTENSIONS;

export const FileRef = z.object({
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  ext: z.enum(Object.keys(FILE_EXTENSIONS) as [FileExt, ...FileExt[]]),
  bytes: z.number().int().min(0),
});
export type FileRef = z.infer<typeof FileRef>;

export const SlotSummary = z.object({
  count: z.number().int(),
  authored: z.number().int(),
  generated: z.number().int(),
  flipped: z.number().int(),
  ambiguous: z.number().int(),
  shortfall: SlotShortfall.nullable(),
});
export type SlotSummary = z.infer<typeof SlotSummary>;

export const ManifestModelVariant = ModelVariantFacts.extend({ name: z.enum(MODEL_VARIANT_NAMES), file: FileRef });
export type ManifestModelVariant = z.infer<typeof ManifestModelVariant>;

export const ManifestRoom = z.object({
  id: z.number().int(),
  title: z.string(),
  architect: z.string(),
  description: z.string(),
  series: z.string(),
  slots: z.number().int().min(0).describe('onchain slot count'),
  token_id: z.union([z.string(), z.number()]).nullable(),
  model: FileRef.nullable().describe('the source model as GLB (model_url)'),
  model_optimized: FileRef.nullable(),
  image: FileRef.nullable().describe('original preview image (image_url)'),
  thumbnail: FileRef.nullable(),
  slot_data: FileRef.nullable().describe('RoomSlotData JSON'),
  slot_summary: SlotSummary.nullable(),
  /** Every model variant, draco (= model_optimized) first; manifests written before variants existed have none. */
  model_variants: z.array(ManifestModelVariant).optional(),
  /** What the bake needs to decide whether the room must be rebuilt (decisions: incremental rule). */
  bake: z
    .object({
      key: z.string(),
      baked_at: z.string(),
      warnings: z.array(z.string()),
    })
    .nullable(),
});
export type ManifestRoom = z.infer<typeof ManifestRoom>;

export const MANIFEST_FORMAT = 'museum-manifest@1' as const;

export const Manifest = z.object({
  format: z.literal(MANIFEST_FORMAT),
  bake_id: z.string(),
  published_at: z.string(),
  rooms: z.array(ManifestRoom),
  collections: z.array(Collection),
  artworks: z.array(ManifestArtwork),
  /** QA report (HTML) of the bake that published this manifest. */
  report: FileRef.nullable().optional(),
});
export type Manifest = z.infer<typeof Manifest>;

// ---------------------------------------------------------------------------------------------
// Paths (relative to DATA_DIR) and URLs

export const artifactPaths = (dataDir: string) => ({
  root: dataDir,
  manifest: join(dataDir, 'manifest.json'),
  /** Every published manifest as `<bake_id>.json`: what `bake gc` keeps files for. */
  manifests: join(dataDir, 'manifests'),
  files: join(dataDir, 'files'),
  cache: join(dataDir, 'cache'),
  report: join(dataDir, 'report.html'),
  /** Held by the bake that is publishing into this directory (see lockDataDir). */
  lock: join(dataDir, 'bake.lock'),
});

/** Every file a manifest references (its rooms' files and its QA report). */
export const manifestFileRefs = (manifest: Manifest): FileRef[] =>
  [
    ...manifest.rooms.flatMap((r) => [
      r.model,
      r.model_optimized,
      r.image,
      r.thumbnail,
      r.slot_data,
      ...(r.model_variants ?? []).map((v) => v.file),
    ]),
    manifest.report ?? null,
    ...manifest.artworks.map((a) => a.media_file ?? null),
  ].filter((r): r is FileRef => r !== null);

export const fileName = (ref: Pick<FileRef, 'sha256' | 'ext'>): string => `${ref.sha256}.${ref.ext}`;
export const filePath = (dataDir: string, ref: Pick<FileRef, 'sha256' | 'ext'>): string =>
  join(artifactPaths(dataDir).files, fileName(ref));
export const fileUrl = (publicUrl: string, ref: Pick<FileRef, 'sha256' | 'ext'>): string =>
  `${publicUrl.replace(/\/+$/, '')}/files/${fileName(ref)}`;
/** `/files/<sha256>.<ext>`: the only names the files route serves. */
export const FILE_NAME_PATTERN = /^([0-9a-f]{64})\.([a-z0-9]{2,5})$/;
/**
 * Precompressed siblings of a compressible file, `<sha256>.<ext>.br` / `.gz` (decisions: answers are
 * compressed once, at bake): written beside their file when they save bytes, kept and removed with it.
 */
export const PRECOMPRESSED_EXTENSIONS: ReadonlySet<FileExt> = new Set<FileExt>(['glb', 'json']);
export const CONTENT_ENCODINGS = [
  { encoding: 'br', suffix: 'br' },
  { encoding: 'gzip', suffix: 'gz' },
] as const;
export type ContentEncoding = (typeof CONTENT_ENCODINGS)[number]['encoding'];
/** `<sha256>.<ext>.br|gz` (group 1: the file's own name). */
export const ENCODED_FILE_NAME_PATTERN = /^([0-9a-f]{64}\.[a-z0-9]{2,5})\.(br|gz)$/;
export const contentTypeOf = (ext: string): string => (FILE_EXTENSIONS as Record<string, string>)[ext] ?? 'application/octet-stream';
