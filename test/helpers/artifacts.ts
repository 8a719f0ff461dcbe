/**
 * A small but realistic published bake for server tests, written with the real artifact store
 * (putContentFile / publishManifest) and the real catalog code (bake/content.ts publicCatalog, which
 * applies the media normalization):
 *
 *  - room 1 "The Atrium": source + optimized GLB (RoomBuilder), PNG preview, 512 px WebP thumbnail,
 *    slot data with two authored slots (one flipped) and one generated anchor;
 *  - room 2 "Sculpture Garden": an onchain sculpture with four generated anchors (one ambiguous),
 *    JPEG preview;
 *  - room 3 "The Vault": a model only — no preview, no optimized model, no slot data;
 *  - collections: two published top-level ones, a child and a grandchild, a draft child and a draft
 *    top-level one (drafts and their artworks are not published);
 *  - artworks whose stored marketplace records exercise the four normalization rules (dead host,
 *    square CDN crop, trustworthy/untrustworthy dimensions, ipfs:// URIs), plus optional generated
 *    ones for paging and benchmarks.
 *
 * Deterministic: the same options write the same bytes (and so the same sha256 file names).
 * Other tests (search, guide) use it: `await publishFixtureBake(server.dataDir)`.
 */
import sharp from 'sharp';
import {
  type FileExt,
  type FileRef,
  type Manifest,
  MANIFEST_FORMAT,
  type ManifestRoom,
  type RoomSlot,
  type RoomSlotData,
  SLOT_DATA_VERSION,
  slotDataModels,
  type SlotSummary,
} from '../../artifacts/format.ts';
import { publishManifest, putContentFile } from '../../artifacts/store.ts';
import { ContentArtwork, ContentCollection, publicCatalog } from '../../bake/content.ts';
import { writeGlb } from '../../bake/gltf-io.ts';
import { RoomBuilder } from '../../bake/sample/room-builder.ts';
import { makeThumbnail } from '../../bake/thumbnail.ts';

export interface FixtureOptions {
  /** Woven into room titles, collection titles and artwork names, so two bakes can be told apart. */
  tag?: string;
  /** `generated_at` of every RoomSlotData (default 2025-01-01T00:00:00.000Z). */
  generatedAt?: string;
  /** Additional generated artworks (ids from 1001), spread over the published collections. */
  extraArtworks?: number;
  /** Gateway for ipfs:// media (the server's IPFS_GATEWAY default). */
  ipfsGateway?: string;
}

interface WrittenFile {
  ref: FileRef;
  bytes: Buffer;
}

export interface FixtureBake {
  manifest: Manifest;
  /** The stored records the catalog was built from (before normalization / publication filtering). */
  content: { collections: ContentCollection[]; artworks: ContentArtwork[] };
  /** RoomSlotData per room id, as written. */
  slotData: Map<number, RoomSlotData>;
  /** Every content file written, by role (e.g. `room1.model`, `room2.image`). */
  files: Record<string, WrittenFile>;
  /** Room ids by role. */
  rooms: { withSlots: number; generatedOnly: number; withoutSlots: number };
  /** Artwork ids by the normalization rule they exercise. */
  artworks: {
    deadHost: number;
    squareCrop: number;
    squareCropWithMotion: number;
    trustworthy: number;
    ipfs: number;
    ipfsDoublePrefix: number;
    inDraftCollection: number;
    inGrandchild: number;
    outsideMuseumCollections: number;
  };
}

const FIXTURE_GENERATED_AT = '2025-01-01T00:00:00.000Z';
const FIXTURE_ALGORITHM = 'fixture-slots@1';

const sha = (hex: string) => hex.repeat(64 / hex.length).slice(0, 64);

/** A deterministic gradient image (real pixels, so transforms have something to work on). */
async function gradient(width: number, height: number, format: 'png' | 'jpeg', hue: number): Promise<Buffer> {
  const pixels = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 3;
      pixels[i] = (x * 255) / width;
      pixels[i + 1] = (y * 255) / height;
      pixels[i + 2] = hue;
    }
  }
  const image = sharp(pixels, { raw: { width, height, channels: 3 } });
  return format === 'png' ? image.png().toBuffer() : image.jpeg({ quality: 85 }).toBuffer();
}

async function roomGlb(name: string, generator: string): Promise<Buffer> {
  const b = new RoomBuilder(name);
  b.document.getRoot().getAsset().generator = generator;
  const wall = b.material('Wall');
  b.floorAndCeiling(name, [-5, -4], [5, 4], 3.5, b.material('Floor'), b.material('Ceiling'));
  b.wall('North', [5, -4], [-5, -4], 3.5, 0.2, wall);
  b.wall('South', [-5, 4], [5, 4], 3.5, 0.2, wall, [{ offset: 4, width: 2, sill: 0, height: 2.4 }]);
  b.wall('East', [5, 4], [5, -4], 3.5, 0.2, wall);
  b.wall('West', [-5, -4], [-5, 4], 3.5, 0.2, wall);
  b.slot('Slot_001', { center: [0, 1.6, -3.89], normal: [0, 0, 1], up: [0, 1, 0], width: 1.6, height: 1.2 });
  b.slot('Slot_002', { center: [4.89, 1.6, 0], normal: [-1, 0, 0], up: [0, 1, 0], width: 1.2, height: 0.9 }, 'vertices');
  return Buffer.from(await writeGlb(b.document));
}

async function sculptureGlb(): Promise<Buffer> {
  const b = new RoomBuilder('Sculpture');
  b.document.getRoot().getAsset().generator = 'museum fixture';
  b.box('Plinth', [-1, 0, -1], [1, 0.8, 1], b.material('Stone', { color: [0.6, 0.6, 0.55, 1] }));
  b.box('Figure', [-0.3, 0.8, -0.3], [0.3, 2.6, 0.3], b.material('Bronze', { color: [0.55, 0.4, 0.2, 1], metallic: 1 }));
  return Buffer.from(await writeGlb(b.document));
}

const HALF = Math.SQRT1_2;

function authoredSlots(): RoomSlot[] {
  return [
    {
      id: 'Slot_001',
      index: 1,
      source: 'authored',
      position: [0, 1.6, -3.89],
      quaternion: [0, 0, 0, 1],
      width: 1.6,
      height: 1.2,
      facing: [0, 0, 1],
      flipped: false,
      ambiguous: false,
      clearance: { front: 7.78, back: 0.01 },
      evidence: 'probes: open in front, wall behind',
    },
    {
      // Authored facing into the wall (+X); the bake flipped it to face the room (-X).
      id: 'Slot_002',
      index: 2,
      source: 'authored',
      position: [4.89, 1.6, 0],
      quaternion: [0, -HALF, 0, HALF],
      width: 1.2,
      height: 0.9,
      facing: [-1, 0, 0],
      flipped: true,
      ambiguous: false,
      clearance: { front: 9.78, back: 0.01 },
      evidence: 'probes: authored side closed, other side open',
    },
    {
      id: 'Auto_003',
      index: 3,
      source: 'generated',
      position: [-4.89, 1.6, 0],
      quaternion: [0, HALF, 0, HALF],
      width: 1.2,
      height: 0.9,
      facing: [1, 0, 0],
      flipped: false,
      ambiguous: false,
      evidence: 'surface sample on the west wall',
    },
  ];
}

function sculptureSlots(): RoomSlot[] {
  // Four generated anchors around the plinth, facing outwards.
  const around: Array<[number, number, number, number, number, number]> = [
    // position x, z, facing x, z, quaternion y, w
    [0, 1.05, 0, 1, 0, 1],
    [1.05, 0, 1, 0, HALF, HALF],
    [0, -1.05, 0, -1, 1, 0],
    [-1.05, 0, -1, 0, -HALF, HALF],
  ];
  return around.map(([x, z, fx, fz, qy, qw], i) => ({
    id: `Auto_${String(i + 1).padStart(3, '0')}`,
    index: i + 1,
    source: 'generated' as const,
    position: [x, 0.4, z] as [number, number, number],
    quaternion: [0, qy, 0, qw] as [number, number, number, number],
    width: 0.5,
    height: 0.4,
    facing: [fx, 0, fz] as [number, number, number],
    flipped: false,
    // The plinth is symmetric: the anchor on its back face was decided by the interior tie-break.
    ambiguous: i === 2,
  }));
}

const summaryOf = (slots: RoomSlot[], expected: number): SlotSummary => ({
  count: slots.length,
  authored: slots.filter((s) => s.source === 'authored').length,
  generated: slots.filter((s) => s.source === 'generated').length,
  flipped: slots.filter((s) => s.flipped).length,
  ambiguous: slots.filter((s) => s.ambiguous).length,
  shortfall: slots.length < expected ? { expected, placed: slots.length, reason: 'not enough wall surface' } : null,
});

function storedCollections(tag: string): ContentCollection[] {
  const t = tag ? ` [${tag}]` : '';
  return [
    {
      id: 1,
      name: 'Genesis',
      title: `Genesis${t}`,
      description: 'The first works of the museum.',
      slug: 'genesis',
      status: 'published',
      parent: null,
    },
    {
      id: 2,
      name: 'Genesis Portraits',
      title: `Portraits${t}`,
      description: 'Faces from the first season.',
      slug: 'genesis-portraits',
      status: 'published',
      parent: 1,
    },
    {
      id: 3,
      name: 'Genesis Sketches',
      title: `Sketches${t}`,
      description: 'Work in progress.',
      slug: 'genesis-sketches',
      status: 'draft',
      parent: 1,
    },
    {
      id: 4,
      name: 'Museum Rooms',
      title: `Rooms${t}`,
      description: 'Posters of the rooms.',
      slug: 'rooms',
      status: 'published',
      parent: null,
    },
    { id: 5, name: 'Archive', title: `Archive${t}`, description: 'Not yet public.', slug: 'archive', status: 'draft', parent: null },
    {
      id: 6,
      name: 'Portrait Close-ups',
      title: `Close-ups${t}`,
      description: 'Details.',
      slug: 'portrait-close-ups',
      status: 'published',
      parent: 2,
    },
  ].map((c) => ContentCollection.parse(c));
}

type Blob = { url: string; type?: string; content_type?: string; width?: number; height?: number };
const blob = (url: string, fields: Omit<Blob, 'url'> = {}): Blob => ({
  url,
  type: fields.content_type?.startsWith('video/') ? 'video' : 'image',
  ...fields,
});

/** Artworks as the content store holds them: media blobs, the marketplace record, both collections. */
function storedArtworks(tag: string, extra: number): ContentArtwork[] {
  const t = tag ? ` [${tag}]` : '';
  const record = (fields: Record<string, unknown>) =>
    ContentArtwork.parse({
      marketplace_url: `https://market.example.org/assets/${String(fields.id)}`,
      collection: 'genesis-drop',
      ...fields,
    });
  const works = [
    record({
      id: 101,
      name: `Dead Host Study${t}`,
      artist_name: 'Ada Palette',
      museum_collection: 'genesis',
      media_info: blob('https://openseauserdata.com/files/101-study.png', { width: 1200, height: 800, content_type: 'image/png' }),
      marketplace: {
        image_url: 'https://openseauserdata.com/files/101-study.png',
        display_image_url: 'https://i.seadn.io/gcs/files/101-display.png',
      },
    }),
    record({
      id: 102,
      name: `Square Crop Portrait${t}`,
      artist_name: 'Bruno Lumen',
      museum_collection: 'genesis-portraits',
      media_info: blob('https://i2c.seadn.io/gcs/files/102-crop.png?w=500', { width: 500, height: 500, content_type: 'image/png' }),
      marketplace: { original_image_url: 'https://arweave.net/102-original.jpg' },
    }),
    record({
      id: 103,
      name: `Square Crop In Motion${t}`,
      artist_name: 'Bruno Lumen',
      museum_collection: 'genesis-portraits',
      media_info: blob('https://i2c.seadn.io/gcs/files/103-crop.png', { width: 512, height: 512, content_type: 'image/png' }),
      // The "original" is a video: not a still, so the crop stays, without its square dimensions.
      marketplace: { original_image_url: 'https://cdn.example.org/103-original.mp4', animation_url: 'https://cdn.example.org/103.mp4' },
      display_animation_info: blob('https://cdn.example.org/103.mp4', { content_type: 'video/mp4', width: 1280, height: 720 }),
    }),
    record({
      id: 104,
      name: `Trustworthy Landscape${t}`,
      artist_name: 'Chiara Voss',
      museum_collection: 'genesis',
      media_info: blob('https://cdn.example.org/104-landscape.jpg', { width: 1920, height: 1080, content_type: 'image/jpeg' }),
    }),
    record({
      id: 105,
      name: `Pinned Portrait${t}`,
      artist_name: 'Émile Ünger',
      museum_collection: 'genesis-portraits',
      media_info: blob('ipfs://QmYwAPJzv5CZsnAzt8auVTLpG1bG6dkprdFM5ocTyBCQb/105.png', { width: 1000, height: 1250 }),
    }),
    record({
      id: 106,
      name: `Double Prefix${t}`,
      artist_name: 'Émile Ünger',
      collection: 'room-posters',
      museum_collection: 'rooms',
      media_info: blob('ipfs://ipfs/bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi/106.gif'),
      display_animation_info: blob('ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi/106.mp4', {
        content_type: 'video/mp4',
      }),
    }),
    record({
      id: 107,
      name: `Hidden Sketch${t}`,
      artist_name: 'Ada Palette',
      museum_collection: 'genesis-sketches',
      media_info: blob('https://cdn.example.org/107.png', { width: 800, height: 800 }),
    }),
    record({
      id: 108,
      name: `Eye Close-up${t}`,
      artist_name: 'Chiara Voss',
      museum_collection: 'portrait-close-ups',
      media_info: blob('https://cdn.example.org/108.webp', { width: 600, height: 900, content_type: 'image/webp' }),
    }),
    record({
      id: 109,
      name: `Marketplace Stray${t}`,
      artist_name: 'Dana Quill',
      collection: 'loose-marketplace-collection',
      museum_collection: null,
      media_info: blob('https://cdn.example.org/109.png', { width: 640, height: 480 }),
    }),
  ];
  const slugs = ['genesis', 'genesis-portraits', 'rooms', 'portrait-close-ups'];
  for (let i = 1; i <= extra; i++) {
    works.push(
      record({
        id: 1000 + i,
        name: `Generated Work ${i}${t}`,
        artist_name: `Artist ${i % 17}`,
        collection: `drop-${i % 3}`,
        museum_collection: slugs[i % slugs.length],
        media_info: blob(`https://cdn.example.org/generated/${i}.png`, {
          width: 800 + (i % 5) * 100,
          height: 600 + (i % 3) * 100,
          content_type: 'image/png',
        }),
      }),
    );
  }
  return works;
}

/** Write the fixture bake into `dataDir` and publish its manifest (atomically, like a real bake). */
/** A manifest room whose model is known but was never baked (no optimized model, slots or images). */
export const unbakedRoom = (id: number, model: FileRef, fields: Partial<ManifestRoom> = {}): ManifestRoom => ({
  id,
  title: `Room ${id}`,
  architect: '',
  description: '',
  series: '',
  slots: 0,
  token_id: null,
  model,
  model_optimized: null,
  image: null,
  thumbnail: null,
  slot_data: null,
  slot_summary: null,
  bake: null,
  ...fields,
});

export async function publishFixtureBake(dataDir: string, options: FixtureOptions = {}): Promise<FixtureBake> {
  const tag = options.tag ?? '';
  const t = tag ? ` [${tag}]` : '';
  const generatedAt = options.generatedAt ?? FIXTURE_GENERATED_AT;
  const files: Record<string, WrittenFile> = {};
  const put = async (role: string, bytes: Buffer, ext: FileExt): Promise<FileRef> => {
    const ref = await putContentFile(dataDir, bytes, ext);
    files[role] = { ref, bytes };
    return ref;
  };

  const atriumPreview = await gradient(640, 400, 'png', 90);
  const gardenPreview = await gradient(800, 600, 'jpeg', 200);
  const atrium = {
    model: await put('room1.model', await roomGlb('Atrium', 'museum fixture'), 'glb'),
    optimized: await put('room1.model_optimized', await roomGlb('Atrium', 'museum fixture (optimized)'), 'glb'),
    image: await put('room1.image', atriumPreview, 'png'),
    thumbnail: await put('room1.thumbnail', Buffer.from(await makeThumbnail(atriumPreview)), 'webp'),
  };
  const garden = {
    model: await put('room2.model', await sculptureGlb(), 'glb'),
    image: await put('room2.image', gardenPreview, 'jpg'),
    thumbnail: await put('room2.thumbnail', Buffer.from(await makeThumbnail(gardenPreview)), 'webp'),
  };
  const vaultModel = await put('room3.model', await roomGlb('Vault', 'museum fixture vault'), 'glb');

  const slotData = new Map<number, RoomSlotData>();
  const slotFile = async (room: number, files: { model: FileRef; optimized: FileRef | null }, slots: RoomSlot[], onchain: number) => {
    const optimized = files.optimized ? [{ file: files.optimized }] : [];
    const data: RoomSlotData = {
      version: SLOT_DATA_VERSION,
      room,
      ...slotDataModels({ source: files.model, optimized: files.optimized, variants: optimized }),
      generated_at: generatedAt,
      algorithm: FIXTURE_ALGORITHM,
      slots,
      onchain_slots: onchain,
      shortfall: null,
      warnings: [],
    };
    slotData.set(room, data);
    return put(`room${room}.slot_data`, Buffer.from(JSON.stringify(data)), 'json');
  };
  const atriumSlots = authoredSlots();
  const gardenSlots = sculptureSlots();
  const bake = (key: string) => ({ key, baked_at: generatedAt, warnings: [] as string[] });

  const rooms: ManifestRoom[] = [
    {
      id: 1,
      title: `The Atrium${t}`,
      architect: 'Studio Lovelace',
      description: 'A bright hall with a doorway to the south.',
      series: 'Genesis',
      slots: 3,
      token_id: '1',
      model: atrium.model,
      model_optimized: atrium.optimized,
      image: atrium.image,
      thumbnail: atrium.thumbnail,
      slot_data: await slotFile(1, atrium, atriumSlots, 3),
      slot_summary: summaryOf(atriumSlots, 3),
      bake: bake(sha('a1')),
    },
    {
      id: 2,
      title: `Sculpture Garden${t}`,
      architect: 'Atelier Hopper',
      description: 'An onchain sculpture on a plinth.',
      series: 'Sculptures',
      slots: 4,
      token_id: 2,
      model: garden.model,
      model_optimized: null,
      image: garden.image,
      thumbnail: garden.thumbnail,
      slot_data: await slotFile(2, { model: garden.model, optimized: null }, gardenSlots, 4),
      slot_summary: summaryOf(gardenSlots, 4),
      bake: bake(sha('b2')),
    },
    unbakedRoom(3, vaultModel, {
      title: `The Vault${t}`,
      architect: 'Studio Lovelace',
      description: 'Not baked yet.',
      series: 'Genesis',
      slots: 2,
    }),
  ];

  const content = { collections: storedCollections(tag), artworks: storedArtworks(tag, options.extraArtworks ?? 0) };
  const catalog = publicCatalog(content, { ipfsGateway: options.ipfsGateway ?? 'https://ipfs.io' });
  const manifest: Manifest = {
    format: MANIFEST_FORMAT,
    bake_id: `fixture${tag ? `-${tag}` : ''}`,
    published_at: generatedAt,
    rooms,
    collections: catalog.collections,
    artworks: catalog.artworks,
    report: null,
  };
  await publishManifest(dataDir, manifest);
  return {
    manifest,
    content,
    slotData,
    files,
    rooms: { withSlots: 1, generatedOnly: 2, withoutSlots: 3 },
    artworks: {
      deadHost: 101,
      squareCrop: 102,
      squareCropWithMotion: 103,
      trustworthy: 104,
      ipfs: 105,
      ipfsDoublePrefix: 106,
      inDraftCollection: 107,
      inGrandchild: 108,
      outsideMuseumCollections: 109,
    },
  };
}
