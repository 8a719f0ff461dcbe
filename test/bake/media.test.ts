import { describe, expect, it } from 'vitest';
import { ContentArtwork } from '../../bake/content.ts';
import { isDeadHost, isSquareCrop, mimeFromUrl, normalizeArtwork, resolveIpfs } from '../../bake/media.ts';

const GATEWAY = 'https://gw.example';
type Blob = { url: string; type?: string; content_type?: string; width?: number; height?: number };
/** A stored artwork: its media blobs and marketplace record, as the content store holds them. */
const record = (fields: {
  media_info?: Blob;
  display_media_info?: Blob;
  display_animation_info?: Blob;
  marketplace?: Record<string, string>;
}) =>
  ContentArtwork.parse({
    id: 1,
    name: 'Work',
    artist_name: 'Artist',
    collection: 'c',
    museum_collection: null,
    marketplace_url: 'https://m.example/1',
    ...fields,
  });
const normalize = (fields: Parameters<typeof record>[0]) => normalizeArtwork(record(fields), { ipfsGateway: GATEWAY });
const still = (url: string, fields: Omit<Blob, 'url'> = {}): Blob => ({ url, type: 'image', ...fields });
const video = (url: string, fields: Omit<Blob, 'url'> = {}): Blob => ({ url, type: 'video', content_type: 'video/mp4', ...fields });

describe('hosts', () => {
  it('recognizes the dead host and its subdomains, and the square-crop CDN', () => {
    expect(isDeadHost('https://openseauserdata.com/x.png')).toBe(true);
    expect(isDeadHost('https://storage.openseauserdata.com/x.png')).toBe(true);
    expect(isDeadHost('https://notopenseauserdata.com/x.png')).toBe(false);
    expect(isSquareCrop('https://i2c.seadn.io/a/b.png?w=500')).toBe(true);
    expect(isSquareCrop('https://i.seadn.io/a/b.png')).toBe(false);
  });
});

describe('the still and the animation from the media blobs', () => {
  it('takes media_info, with its declared type and dimensions', () => {
    const a = normalize({ media_info: still('https://cdn.example/1', { content_type: 'image/webp', width: 1200, height: 1600 }) });
    expect(a.media).toEqual({ url: 'https://cdn.example/1', type: 'image', content_type: 'image/webp', width: 1200, height: 1600 });
    expect(a.animation).toBeNull();
    expect(a.ratio).toBeCloseTo(0.75);
  });

  it.each([
    ['a video', video('https://cdn.example/1.mp4', { width: 1920, height: 1080 })],
    ['a model', { url: 'https://cdn.example/1.glb', type: 'model', content_type: 'model/gltf-binary' }],
    ['untyped, but an mp4', { url: 'https://cdn.example/1.mp4' }],
  ])('skips media_info when it is %s and takes display_media_info', (_what, first) => {
    const a = normalize({ media_info: first, display_media_info: still('https://cdn.example/1.png', { width: 400, height: 300 }) });
    expect(a.media).toEqual({ url: 'https://cdn.example/1.png', type: 'image', content_type: 'image/png', width: 400, height: 300 });
  });

  it('takes the animation from display_animation_info, and its ratio when the still has no dimensions', () => {
    const a = normalize({
      media_info: still('https://cdn.example/1.gif'),
      display_animation_info: video('https://cdn.example/1.mp4', { width: 1080, height: 1350 }),
    });
    expect(a.animation).toEqual({ url: 'https://cdn.example/1.mp4', type: 'video', content_type: 'video/mp4', width: 1080, height: 1350 });
    expect(a.ratio).toBeCloseTo(0.8);
  });

  it("without a still blob, falls back to the marketplace record's live still image, without dimensions", () => {
    const a = normalize({
      media_info: video('https://cdn.example/1.mp4'),
      marketplace: { display_image_url: 'https://openseauserdata.com/1.png', image_url: 'https://cdn.example/1.jpg' },
    });
    expect(a.media).toEqual({ url: 'https://cdn.example/1.jpg', type: 'image', content_type: 'image/jpeg', width: null, height: null });
    expect(
      normalize({ media_info: video('https://cdn.example/1.mp4'), marketplace: { image_url: 'https://cdn.example/1.mp4' } }).media,
    ).toBeNull();
  });
});

describe('rule 1: dead hosts', () => {
  it('swaps a dead image for the live display image of the marketplace record, keeping the work dimensions', () => {
    const a = normalize({
      media_info: still('https://storage.openseauserdata.com/f/1.png', { width: 1600, height: 900 }),
      marketplace: { display_image_url: 'https://cdn.example/1.png' },
    });
    expect(a.media).toEqual({ url: 'https://cdn.example/1.png', type: 'image', content_type: 'image/png', width: 1600, height: 900 });
    expect(a.ratio).toBeCloseTo(16 / 9);
  });

  it('falls through dead display images to the animation', () => {
    const a = normalize({
      media_info: still('https://openseauserdata.com/1.png'),
      display_animation_info: video('https://cdn.example/1.mp4', { width: 1920, height: 1080 }),
      marketplace: { image_url: 'https://openseauserdata.com/1.png', display_image_url: 'https://i.openseauserdata.com/1.png' },
    });
    expect(a.media).toEqual({ url: 'https://cdn.example/1.mp4', type: 'video', content_type: 'video/mp4', width: 1920, height: 1080 });
    expect(a.animation?.url).toBe('https://cdn.example/1.mp4');
  });

  it("replaces a dead animation with the marketplace record's live one", () => {
    const a = normalize({
      media_info: still('https://cdn.example/1.png'),
      display_animation_info: video('https://openseauserdata.com/1.mp4', { width: 640, height: 480 }),
      marketplace: { animation_url: 'https://cdn.example/1.webm' },
    });
    expect(a.animation).toEqual({ url: 'https://cdn.example/1.webm', type: 'video', content_type: 'video/webm', width: 640, height: 480 });
  });

  it('gives no media when nothing is live', () => {
    const a = normalize({ media_info: still('https://openseauserdata.com/1.png', { width: 10, height: 20 }) });
    expect(a.media).toBeNull();
    expect(a.ratio).toBe(1);
  });
});

describe('rule 2: square crops', () => {
  it('prefers the live original and drops the square crop dimensions', () => {
    const a = normalize({
      media_info: still('https://i2c.seadn.io/e/1.png?w=500', { width: 500, height: 500 }),
      marketplace: { original_image_url: 'https://cdn.example/orig/1.png' },
    });
    expect(a.media).toEqual({ url: 'https://cdn.example/orig/1.png', type: 'image', content_type: 'image/png', width: null, height: null });
    expect(a.ratio).toBe(1);
  });

  it.each([
    ['a video', 'https://cdn.example/orig/1.mp4'],
    ['a model', 'https://cdn.example/orig/1.glb'],
    ['an html page', 'https://cdn.example/orig/index.html'],
    ['on a dead host', 'https://storage.openseauserdata.com/orig/1.png'],
  ])('keeps the crop when the original is %s, still without the crop dimensions', (_what, original) => {
    const a = normalize({
      media_info: still('https://i2c.seadn.io/e/1.png?w=500', { width: 500, height: 500 }),
      marketplace: { original_image_url: original },
    });
    expect(a.media?.url).toBe('https://i2c.seadn.io/e/1.png?w=500');
    expect(a.media?.width).toBeNull();
    expect(a.ratio).toBe(1);
  });
});

describe('rule 3: ratio', () => {
  it('comes from the first trustworthy dimensions: the still, then the animation', () => {
    expect(normalize({ media_info: still('https://cdn.example/1.png', { width: 1200, height: 1600 }) }).ratio).toBeCloseTo(0.75);
    const crop = normalize({
      media_info: still('https://i2c.seadn.io/1.png', { width: 500, height: 500 }),
      display_animation_info: video('https://cdn.example/1.mp4', { width: 1920, height: 1080 }),
    });
    expect(crop.ratio).toBeCloseTo(16 / 9);
  });

  it('is 1 when nothing is known, and a genuinely square work keeps 1 from its own dimensions', () => {
    expect(normalize({ media_info: still('https://cdn.example/1.webp') }).ratio).toBe(1);
    const square = normalize({ media_info: still('https://cdn.example/1.png', { width: 1000, height: 1000 }) });
    expect(square.ratio).toBe(1);
    expect(square.media?.width).toBe(1000);
  });
});

describe('rule 4: IPFS', () => {
  it('resolves ipfs://X and ipfs://ipfs/X to the gateway', () => {
    expect(resolveIpfs('ipfs://bafy/1.png', GATEWAY)).toBe('https://gw.example/ipfs/bafy/1.png');
    expect(resolveIpfs('ipfs://ipfs/Qm/1.png', 'https://gw.example/')).toBe('https://gw.example/ipfs/Qm/1.png');
    expect(resolveIpfs('https://cdn.example/1.png', GATEWAY)).toBe('https://cdn.example/1.png');
    const a = normalize({ media_info: still('ipfs://ipfs/Qm/1.jpg'), display_animation_info: video('ipfs://bafy/1.mp4') });
    expect(a.media?.url).toBe('https://gw.example/ipfs/Qm/1.jpg');
    expect(a.media?.content_type).toBe('image/jpeg');
    expect(a.animation?.url).toBe('https://gw.example/ipfs/bafy/1.mp4');
  });
});

describe('media types', () => {
  it('come from the declared type, else the file name, else the blob kind', () => {
    expect(mimeFromUrl('https://x.example/a/b.JPG?w=1')).toBe('image/jpeg');
    expect(mimeFromUrl('ipfs://bafy')).toBeNull();
    expect(normalize({ media_info: still('ipfs://bafy', { content_type: 'image/gif' }) }).media?.content_type).toBe('image/gif');
    expect(normalize({ media_info: still('ipfs://bafy') }).media).toMatchObject({
      type: 'image',
      content_type: 'application/octet-stream',
    });
    expect(
      normalize({ media_info: still('ipfs://bafy'), display_animation_info: { url: 'ipfs://bafz', type: 'video' } }).animation,
    ).toMatchObject({ type: 'video', content_type: 'application/octet-stream' });
  });
});
