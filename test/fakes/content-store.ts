/**
 * The museum's content store as Directus holds it (decisions: "Content store"), derived from
 * content in the bake's format, so the fake store and the sample content always agree and a sync
 * of the fake store gives back the content it was made from:
 *   collections  id, name, title, description, essay, slug, sort, status, parent_collection (id),
 *                child_collections (ids)
 *   nfts         id, name, artist_name, collection (marketplace slug), collection_type (museum
 *                collection id), media_info, display_media_info, display_animation_info
 *                (blobs { type, content_type, url, width, height }), response_opensea (the
 *                marketplace record; opensea_url is the marketplace link)
 *   rooms        id, title, architect, description, series, slots, token_id, image, model (file ids)
 */
import { mulberry32 as prng } from '../../common/random.ts';
import type { ContentArtwork, ContentCollection, ContentMedia } from '../../bake/content.ts';
import { SAMPLE_ARTWORKS, SAMPLE_COLLECTIONS, SAMPLE_ROOMS } from '../../bake/sample/generate.ts';
import type { DirectusFile, DirectusFakeOptions, DirectusRecord } from './directus.ts';

export type ContentStoreRecords = NonNullable<DirectusFakeOptions['content']>;

/** A media blob as the store holds it (every key present; nulls where unknown). */
const storeBlob = (m: ContentMedia | null) =>
  m && { type: m.type, content_type: m.content_type, url: m.url, width: m.width, height: m.height };

function storeCollections(collections: ContentCollection[]): DirectusRecord[] {
  return collections.map((c) => ({
    id: c.id,
    name: c.name,
    title: c.title,
    description: c.description,
    essay: null,
    slug: c.slug,
    sort: c.sort,
    status: c.status,
    parent_collection: c.parent,
    child_collections: collections.filter((child) => child.parent === c.id).map((child) => child.id),
  }));
}

function storeNfts(artworks: ContentArtwork[], collections: ContentCollection[]): DirectusRecord[] {
  const idOf = new Map(collections.map((c) => [c.slug, c.id]));
  return artworks.map((a) => ({
    id: a.id,
    name: a.name,
    artist_name: a.artist_name,
    collection: a.collection,
    collection_type: a.museum_collection === null ? null : idOf.get(a.museum_collection)!,
    media_info: storeBlob(a.media_info),
    display_media_info: storeBlob(a.display_media_info),
    display_animation_info: storeBlob(a.display_animation_info),
    response_opensea: {
      identifier: String(a.id),
      collection: a.collection,
      name: a.name,
      description: null,
      ...a.marketplace,
      metadata_url: null,
      opensea_url: a.marketplace_url,
      is_disabled: false,
      is_nsfw: false,
    },
  }));
}

// ---------------------------------------------------------------------------------------------
// A sample store: the sample collections and artworks, generated artworks to exercise paging, one
// record not listed (no media_info), the sample rooms with small GLB models and PNG previews as
// Directus files.

/** A minimal valid GLB (JSON chunk only) that names its room, so every model has its own bytes. */
function minimalGlb(label: string): Uint8Array {
  let json = JSON.stringify({ asset: { version: '2.0', generator: label } });
  while (json.length % 4) json += ' ';
  const total = 12 + 8 + json.length;
  const out = Buffer.alloc(total);
  out.write('glTF', 0, 'ascii');
  out.writeUInt32LE(2, 4);
  out.writeUInt32LE(total, 8);
  out.writeUInt32LE(json.length, 12);
  out.write('JSON', 16, 'ascii');
  out.write(json, 20, 'utf8');
  return out;
}

/** A 1×1 PNG. */
const TINY_PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');

/** The id of the sample store's record that has no media_info (so it is not listed). */
export const UNLISTED_NFT_ID = 999;

const hex = (rand: () => number, n: number) => Array.from({ length: n }, () => Math.floor(rand() * 16).toString(16)).join('');
const uuid = (rand: () => number) => `${hex(rand, 8)}-${hex(rand, 4)}-4${hex(rand, 3)}-a${hex(rand, 3)}-${hex(rand, 12)}`;

/** Generated artworks in the content format, spread over the published sample collections. */
function generatedArtworks(count: number, firstId = 1000): ContentArtwork[] {
  const museum = ['founders', 'founders-portraits', 'founders-landscapes', 'generative'];
  return Array.from({ length: count }, (_, i): ContentArtwork => {
    const id = firstId + i;
    const square = i % 7 === 0;
    return {
      id,
      name: `Work ${id}`,
      artist_name: `Artist ${i % 17}`,
      collection: `drop-${i % 3}`,
      museum_collection: museum[i % museum.length]!,
      marketplace_url: `https://market.example/assets/${id}`,
      media_info: {
        url: square ? `https://i2c.seadn.io/${id}.png` : i % 11 === 0 ? `ipfs://bafy${id}/image.png` : `https://cdn.example/${id}.png`,
        type: 'image',
        content_type: 'image/png',
        width: square ? 512 : 800 + (i % 5) * 100,
        height: square ? 512 : 600,
      },
      display_media_info: null,
      display_animation_info:
        i % 13 === 0 ? { url: `https://cdn.example/${id}.mp4`, type: 'video', content_type: 'video/mp4', width: 1280, height: 720 } : null,
      marketplace: {
        image_url: `https://cdn.example/${id}.png`,
        display_image_url: null,
        original_image_url: square ? `https://cdn.example/original/${id}.jpg` : null,
        animation_url: null,
        display_animation_url: null,
      },
    };
  });
}

/**
 * The sample content (bake/sample) as a content store, with `artworks` nft records in all (the
 * sample's, generated ones, and one without media_info) and `rooms` rooms.
 */
export function sampleContentStore(
  options: { artworks?: number; rooms?: number } = {},
): ContentStoreRecords & { content: { collections: ContentCollection[]; artworks: ContentArtwork[] } } {
  const total = options.artworks ?? 250;
  const listed = [...SAMPLE_ARTWORKS, ...generatedArtworks(Math.max(0, total - SAMPLE_ARTWORKS.length - 1))].slice(
    0,
    Math.max(0, total - 1),
  );
  const nfts = storeNfts(listed, SAMPLE_COLLECTIONS);
  if (total > 0) {
    nfts.push({
      ...storeNfts([{ ...listed[0]!, id: UNLISTED_NFT_ID, name: 'Not yet listed' }], SAMPLE_COLLECTIONS)[0]!,
      media_info: null,
      display_media_info: null,
    });
  }
  const rand = prng(42);
  const files: Record<string, DirectusFile> = {};
  const rooms: DirectusRecord[] = SAMPLE_ROOMS.slice(0, options.rooms ?? 3).map((room) => {
    const model = uuid(rand);
    const image = uuid(rand);
    files[model] = { data: minimalGlb(`room ${room.id}`), type: 'model/gltf-binary', filename: `${room.slug}.glb` };
    files[image] = { data: TINY_PNG, type: 'image/png', filename: `${room.slug}.png` };
    const { id, title, architect, description, series, slots, token_id } = room;
    return { id, title, architect, description, series, slots, token_id, model, image: id === 3 ? null : image };
  });
  return {
    collections: storeCollections(SAMPLE_COLLECTIONS),
    nfts: nfts.sort((a, b) => a.id - b.id),
    rooms,
    files,
    content: { collections: SAMPLE_COLLECTIONS, artworks: listed },
  };
}
