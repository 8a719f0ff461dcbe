import { describe, expect, it } from 'vitest';
import { ContentArtwork } from '../../bake/content.ts';
import { isDeadHost, isSquareCrop, mimeFromUrl, normalizeArtwork, resolveIpfs } from '../../bake/media.ts';

const GATEWAY = 'https://gw.example';
const record = (fields: Record<string, unknown>) =>
  ContentArtwork.parse({ id: 1, name: 'Work', artist_name: 'Artist', collection: 'c', marketplace_url: 'https://m.example/1', ...fields });
const normalize = (fields: Record<string, unknown>) => normalizeArtwork(record(fields), { ipfsGateway: GATEWAY });

describe('hosts', () => {
  it('recognizes the dead host and its subdomains, and the square-crop CDN', () => {
    expect(isDeadHost('https://openseauserdata.com/x.png')).toBe(true);
    expect(isDeadHost('https://storage.openseauserdata.com/x.png')).toBe(true);
    expect(isDeadHost('https://notopenseauserdata.com/x.png')).toBe(false);
    expect(isSquareCrop('https://i2c.seadn.io/a/b.png?w=500')).toBe(true);
    expect(isSquareCrop('https://i.seadn.io/a/b.png')).toBe(false);
  });
});

describe('rule 1: dead hosts', () => {
  it('swaps a dead image for the live display image, keeping the work dimensions', () => {
    const a = normalize({ image_url: 'https://storage.openseauserdata.com/f/1.png', width: 1600, height: 900, display_image_url: 'https://cdn.example/1.png' });
    expect(a.media).toEqual({ url: 'https://cdn.example/1.png', type: 'image', content_type: 'image/png', width: 1600, height: 900 });
    expect(a.ratio).toBeCloseTo(16 / 9);
  });

  it('falls through dead display images to the animation', () => {
    const a = normalize({
      image_url: 'https://openseauserdata.com/1.png',
      display_image_url: 'https://i.openseauserdata.com/1.png',
      animation_url: 'https://cdn.example/1.mp4',
      animation_width: 1920,
      animation_height: 1080,
    });
    expect(a.media).toEqual({ url: 'https://cdn.example/1.mp4', type: 'video', content_type: 'video/mp4', width: 1920, height: 1080 });
    expect(a.animation?.url).toBe('https://cdn.example/1.mp4');
  });

  it('gives no media when nothing is live', () => {
    const a = normalize({ image_url: 'https://openseauserdata.com/1.png' });
    expect(a.media).toBeNull();
    expect(a.ratio).toBe(1);
  });
});

describe('rule 2: square crops', () => {
  it('prefers the live original and drops the square crop dimensions', () => {
    const a = normalize({ image_url: 'https://i2c.seadn.io/e/1.png?w=500', width: 500, height: 500, original_image_url: 'https://cdn.example/orig/1.png' });
    expect(a.media).toEqual({ url: 'https://cdn.example/orig/1.png', type: 'image', content_type: 'image/png', width: null, height: null });
    expect(a.ratio).toBe(1);
  });

  it.each([
    ['a video', 'https://cdn.example/orig/1.mp4'],
    ['a model', 'https://cdn.example/orig/1.glb'],
    ['an html page', 'https://cdn.example/orig/index.html'],
    ['on a dead host', 'https://storage.openseauserdata.com/orig/1.png'],
  ])('keeps the crop when the original is %s, still without the crop dimensions', (_what, original) => {
    const a = normalize({ image_url: 'https://i2c.seadn.io/e/1.png?w=500', width: 500, height: 500, original_image_url: original });
    expect(a.media?.url).toBe('https://i2c.seadn.io/e/1.png?w=500');
    expect(a.media?.width).toBeNull();
    expect(a.ratio).toBe(1);
  });
});

describe('rule 3: ratio', () => {
  it('comes from the first trustworthy dimensions: the still, then the animation', () => {
    expect(normalize({ image_url: 'https://cdn.example/1.png', width: 1200, height: 1600 }).ratio).toBeCloseTo(0.75);
    expect(normalize({ image_url: 'https://cdn.example/1.gif', animation_url: 'https://cdn.example/1.mp4', animation_width: 1080, animation_height: 1350 }).ratio).toBeCloseTo(0.8);
    expect(normalize({ image_url: 'https://i2c.seadn.io/1.png', width: 500, height: 500, animation_url: 'https://cdn.example/1.mp4', animation_width: 1920, animation_height: 1080 }).ratio).toBeCloseTo(16 / 9);
  });

  it('is 1 when nothing is known, and a genuinely square work keeps 1 from its own dimensions', () => {
    expect(normalize({ image_url: 'https://cdn.example/1.webp' }).ratio).toBe(1);
    const square = normalize({ image_url: 'https://cdn.example/1.png', width: 1000, height: 1000 });
    expect(square.ratio).toBe(1);
    expect(square.media?.width).toBe(1000);
  });
});

describe('rule 4: IPFS', () => {
  it('resolves ipfs://X and ipfs://ipfs/X to the gateway', () => {
    expect(resolveIpfs('ipfs://bafy/1.png', GATEWAY)).toBe('https://gw.example/ipfs/bafy/1.png');
    expect(resolveIpfs('ipfs://ipfs/Qm/1.png', 'https://gw.example/')).toBe('https://gw.example/ipfs/Qm/1.png');
    expect(resolveIpfs('https://cdn.example/1.png', GATEWAY)).toBe('https://cdn.example/1.png');
    const a = normalize({ image_url: 'ipfs://ipfs/Qm/1.jpg', animation_url: 'ipfs://bafy/1.mp4' });
    expect(a.media?.url).toBe('https://gw.example/ipfs/Qm/1.jpg');
    expect(a.media?.content_type).toBe('image/jpeg');
    expect(a.animation?.url).toBe('https://gw.example/ipfs/bafy/1.mp4');
  });
});

describe('media types', () => {
  it('come from the declared type, else the file name', () => {
    expect(mimeFromUrl('https://x.example/a/b.JPG?w=1')).toBe('image/jpeg');
    expect(mimeFromUrl('ipfs://bafy')).toBeNull();
    expect(normalize({ image_url: 'ipfs://bafy', content_type: 'image/gif' }).media?.content_type).toBe('image/gif');
    expect(normalize({ image_url: 'ipfs://bafy' }).media).toMatchObject({ type: 'image', content_type: 'application/octet-stream' });
  });
});
