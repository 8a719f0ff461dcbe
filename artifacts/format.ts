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
/**
 * The original's placeholder material, which generated `Auto_NNN` quads carry (decisions,
 * "Artifacts"): a faint blue pane in any generic viewer, never an opaque colour.
 */
export const SLOT_PLACEHOLDER_LOOK = {
  baseColorFactor: [0.37, 0.69, 1, 0.25],
  alphaMode: 'BLEND',
  doubleSided: true,
  metallicFactor: 0,
  roughnessFactor: 1,
} as const;
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

/**
 * Where the anchors are (decisions, "Artifacts": frame and units): the glTF scene's own frame —
 * right-handed, +Y up, metres, every node transform of the default scene applied — the frame the
 * model itself is in. Engines with a left-handed convention convert them as they do the model.
 */
const FRAME = "the glTF scene's frame (right-handed, +Y up, metres)";
const LEFT_HANDED =
  'Engines with a left-handed convention (Babylon.js under its __root__ node, Unity) convert it as they convert the model itself';

export const RoomSlot = z
  .object({
    id: z.string().regex(SLOT_ID_PATTERN).describe('Slot_NNN (authored node) or Auto_NNN (generated)'),
    index: z.number().int().min(1).describe('1-based slot number'),
    source: z.enum(['authored', 'generated']),
    position: Vec3.describe(`anchor centre [x, y, z] in ${FRAME}. ${LEFT_HANDED}.`),
    quaternion: Quat.describe(
      `orientation [x, y, z, w] in ${FRAME}: local +Z = facing (towards the viewer), local +Y = up. ${LEFT_HANDED}.`,
    ),
    width: z.number().positive().describe('frame width in metres (along the local +X axis)'),
    height: z.number().positive().describe('frame height in metres (along the local +Y axis)'),
    facing: Vec3.describe(`unit vector towards the viewer, equal to the quaternion's +Z, in ${FRAME}`),
    flipped: z.boolean().describe('authored normal pointed into the wall and was flipped'),
    ambiguous: z.boolean().describe('evidence could not decide; the interior tie-break did'),
    // Optional measured facts (additions allowed by the issue; the seed fields keep their meaning).
    clearance: z
      .object({ front: z.number(), back: z.number() })
      .optional()
      .describe('open distance in metres measured by the probes in front of / behind the frame'),
    evidence: z.string().optional().describe('which evidence decided the facing'),
    view: z
      .object({
        position: Vec3.describe(`where a visitor stands (feet, on the navmesh, reachable from the room's spawn), in ${FRAME}`),
        distance: z.number().describe('horizontal metres from position to the frame centre'),
      })
      .nullable()
      .optional()
      .describe(
        'where to stand to see the artwork: clamp(1.5 × max(width, height), 1.2, 6) m in front along facing, else the nearest ' +
          'navmesh point with a clear line of sight from 1.6 m above it and ≥ 0.8 m away; null when none within 8 m ' +
          '(or the room has no navmesh); absent in slot data baked before walkable rooms',
      ),
  })
  .meta({ id: 'RoomSlot' });
export type RoomSlot = z.infer<typeof RoomSlot>;

export const SlotShortfall = z.object({
  expected: z.number().int().min(0),
  placed: z.number().int().min(0),
  reason: z.string(),
});
export type SlotShortfall = z.infer<typeof SlotShortfall>;

const FileId = z.string().regex(/^[0-9a-f]{64}$/);

export const RoomSlotData = z
  .object({
    version: z.literal(SLOT_DATA_VERSION),
    room: z.number().int(),
    model: FileId.describe(
      'file id (sha256, the name of its /files/<sha256>.glb URL) of the model a client loads by default: the optimized model behind ' +
        "model_optimized_url, or the source model's when none is baked. The anchors hold in every file of `models`.",
    ),
    source_model: FileId.describe('sha256 of the source model file (behind model_url) the anchors were computed from'),
    models: z
      .array(FileId)
      .min(1)
      .describe(
        'every file id the anchors hold in: the source model, ' +
          'then each model variant (draco, meshopt, plain, …) in model_variants order. ' +
          'A client loading a file whose id is not here should not trust these anchors for it.',
      ),
    generated_at: z.string(),
    algorithm: z.string().describe('slot algorithm revision; changes whenever its output can change'),
    slots: z.array(RoomSlot).describe(`the anchors, in ${FRAME}; every optimized model carries each one as its Slot_NNN / Auto_NNN node`),
    onchain_slots: z.number().int().min(0).optional(),
    shortfall: SlotShortfall.nullable().optional(),
    warnings: z.array(z.string()).optional(),
  })
  .meta({ id: 'RoomSlotData' });
export type RoomSlotData = z.infer<typeof RoomSlotData>;

/** The file ids of RoomSlotData: which files its anchors were computed from and hold in. */
export type SlotDataModels = Pick<RoomSlotData, 'model' | 'source_model' | 'models'>;

/**
 * `model`, `source_model` and `models` of a room's slot data from the files its anchors are embedded
 * in: `variants` as the room lists them (draco = the optimized model first), so every later variant
 * is named without more code.
 */
export function slotDataModels(files: {
  source: Pick<FileRef, 'sha256'>;
  optimized: Pick<FileRef, 'sha256'> | null;
  variants: ReadonlyArray<{ file: Pick<FileRef, 'sha256'> }>;
}): SlotDataModels {
  const source_model = files.source.sha256;
  const model = files.optimized?.sha256 ?? source_model;
  const models = [...new Set([source_model, model, ...files.variants.map((v) => v.file.sha256)])];
  return { model, source_model, models };
}

/** Slot data written before 2026-12-02: its `model` named the source file, and it had no source_model / models. */
const LegacyRoomSlotData = RoomSlotData.omit({ source_model: true, models: true });

/**
 * Slot data as published, validated. Slot data written before `source_model` existed is read as
 * what it meant: its anchors were computed from `model` (the source file) and, when `room` is the
 * manifest entry published with it (the same source), hold in that room's optimized model and
 * variants too. Without the room (a file given to `bake room --previous`), only the source is known.
 * Throws the schema's error when the value is neither.
 */
export function readRoomSlotData(
  value: unknown,
  room: Pick<ManifestRoom, 'model' | 'model_optimized' | 'model_variants'> | null,
): RoomSlotData {
  const current = RoomSlotData.safeParse(value);
  if (current.success) return current.data;
  const legacy = LegacyRoomSlotData.safeParse(value);
  if (!legacy.success || (value as { source_model?: unknown }).source_model !== undefined) throw current.error;
  const { version, room: roomId, model, ...rest } = legacy.data;
  const source = room?.model?.sha256 === model ? room.model : null;
  const models = source
    ? slotDataModels({ source, optimized: room!.model_optimized, variants: room!.model_variants ?? [] })
    : { model, source_model: model, models: [model] };
  return { version, room: roomId, ...models, ...rest };
}

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
const MODEL_VARIANT_NAMES = ['draco', 'meshopt', 'plain', 'ktx2'] as const;

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
        'plain: float32 geometry, no compression, textures at most 1024 px (loads with no decoder); ' +
        'ktx2: meshopt geometry, KHR_texture_basisu textures (ETC1S colour, UASTC normal maps, mipmapped; rooms with textures only)',
    ),
  url: z.string(),
  bytes: z.number().int().min(0).describe('bytes of the file (identity); /files sends it br/gzip-encoded when the client accepts it'),
}).meta({ id: 'RoomModelVariant' });

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
    model_url: z.string().nullable().describe('the source model (GLB), as the architect made it'),
    model_optimized_url: z
      .string()
      .nullable()
      .describe(
        'the optimized model (Draco, WebP textures) carrying every anchor as its Slot_NNN / Auto_NNN node; ' +
          'the file clients load by default',
      ),
    slot_data_url: z.string().nullable().describe('the baked anchors (RoomSlotData), public'),
    navmesh_url: z
      .string()
      .nullable()
      .describe(
        'the walkable floor: a GLB whose node NavMesh holds one float32 triangle mesh, in the room frame, reachable from spawn; ' +
          'null until baked or when nothing is walkable (the bake warnings say why)',
      ),
    spawn: Vec3.nullable().describe(
      '[x, y, z] on the navmesh where a visitor enters (an authored Spawn / Entrance node, else the largest indoor region); ' +
        'null without a navmesh',
    ),
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
  .describe(
    `Every model of a room (model_url, model_optimized_url, each model variant) is in one frame, ${FRAME}, never re-centred or ` +
      `re-scaled, and the slot anchors are in it too. ${LEFT_HANDED}.`,
  )
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
  /** The walkable floor (navmesh GLB) and the spawn; manifests written before walkable rooms have none. */
  navmesh: FileRef.nullable().optional(),
  spawn: Vec3.nullable().optional(),
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
      r.navmesh ?? null,
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
