/**
 * Artwork stills that are files of the content source (as the sample's pictures are): the bake
 * stores them content-addressed in the artifacts and publishes their /files path (with the file
 * ref, which `bake gc` keeps); a path that leaves the directory, a missing file, an SVG, bytes that
 * are no image, or a content file as an animation fail with one line naming the record.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileName, filePath, manifestFileRefs, type Manifest } from '../../artifacts/format.ts';
import { emptyManifest } from '../../artifacts/store.ts';
import { ContentError, type ContentArtwork, publicCatalog, storeArtworkFiles } from '../../bake/content.ts';

const PIXELS = 8192 * 8192;
const NO_MARKET: ContentArtwork['marketplace'] = {
  image_url: null,
  display_image_url: null,
  original_image_url: null,
  animation_url: null,
  display_animation_url: null,
};
const artwork = (id: number, url: string, field: 'media_info' | 'display_animation_info' = 'media_info'): ContentArtwork => ({
  id,
  name: `Work ${id}`,
  artist_name: 'Someone',
  collection: 'c',
  museum_collection: null,
  marketplace_url: '',
  media_info: null,
  display_media_info: null,
  display_animation_info: null,
  [field]: { url, type: 'image', content_type: null, width: 300, height: 200 },
  marketplace: NO_MARKET,
});

describe('content files of artworks', () => {
  let root: string;
  let dir: string;
  let dataDir: string;
  let png: Buffer;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'museum-content-files-'));
    dir = join(root, 'content');
    dataDir = join(root, 'data');
    mkdirSync(join(dir, 'pictures'), { recursive: true });
    png = await sharp({ create: { width: 300, height: 200, channels: 3, background: '#336699' } })
      .png()
      .toBuffer();
    writeFileSync(join(dir, 'pictures', 'a.png'), png);
    writeFileSync(join(dir, 'pictures', 'drawing.svg'), '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>');
    writeFileSync(join(dir, 'pictures', 'notes.png'), 'not an image');
    writeFileSync(join(root, 'outside.png'), png);
    symlinkSync(join(root, 'outside.png'), join(dir, 'pictures', 'link.png'));
  });

  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('are stored content-addressed and published as /files paths with their file ref (kept by gc)', async () => {
    const artworks = [artwork(1, 'pictures/a.png'), artwork(2, 'https://cdn.example/b.png')];
    const files = await storeArtworkFiles({ dir, artworks }, dataDir, PIXELS);
    const ref = files.get('pictures/a.png')!;
    expect(ref).toMatchObject({ ext: 'png', bytes: png.length });
    expect(Buffer.compare(readFileSync(filePath(dataDir, ref)), png)).toBe(0);

    const catalog = publicCatalog({ collections: [], artworks }, { ipfsGateway: 'https://ipfs.io', files });
    const [stored, outside] = catalog.artworks;
    expect(stored!.media).toEqual({ url: `/files/${fileName(ref)}`, type: 'image', content_type: 'image/png', width: 300, height: 200 });
    expect(stored!.media_file).toEqual(ref);
    expect(stored!.ratio).toBe(1.5);
    expect(outside!.media!.url).toBe('https://cdn.example/b.png');
    expect(outside!.media_file).toBeUndefined();
    const manifest: Manifest = { ...emptyManifest(), artworks: catalog.artworks };
    expect(manifestFileRefs(manifest)).toEqual([ref]);
  });

  it.each([
    ['../outside.png', /artwork 7 field media_info\.url: "\.\.\/outside\.png" must be a relative path inside the content directory/],
    ['pictures/missing.png', /"pictures\/missing\.png" not found in the content directory/],
    ['pictures/link.png', /"pictures\/link\.png" leads out of the content directory/],
    ['pictures/drawing.svg', /is an SVG; content files must be raster images/],
    ['pictures/notes.png', /"pictures\/notes\.png" is not a readable image/],
    ['pictures', /"pictures" is not a file/],
  ])('refuses %s with one line naming the record', async (url, message) => {
    const error = await storeArtworkFiles({ dir, artworks: [artwork(7, url)] }, dataDir, PIXELS).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ContentError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain('\n');
  });

  it('refuses a content file as the animation, and an image over the pixel bound', async () => {
    const asAnimation = [artwork(8, 'pictures/a.png', 'display_animation_info')];
    const animation = await storeArtworkFiles({ dir, artworks: asAnimation }, dataDir, PIXELS).catch((e: unknown) => e);
    expect((animation as Error).message).toMatch(/artwork 8 field display_animation_info\.url: a content file can only be the still image/);
    const big = await storeArtworkFiles({ dir, artworks: [artwork(9, 'pictures/a.png')] }, dataDir, 100 * 100).catch((e: unknown) => e);
    expect((big as Error).message).toMatch(/"pictures\/a\.png" declares 300×200 pixels, over the limit of 10000 pixels/);
  });
});
