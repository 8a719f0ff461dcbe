/**
 * Textures are encoded without alpha only when no material reads it (bake/texture-alpha.ts): an
 * OPAQUE material's base colour ignores alpha; a BLEND or MASK one reads it, so its texture keeps it.
 */
import { Document, type Material } from '@gltf-transform/core';
import sharp from 'sharp';
import { expect, it } from 'vitest';
import { startTextureCompression } from '../../bake/optimize.ts';

/**
 * A 64² RGBA PNG of noise (lossy WebP beats PNG on it, so the step keeps the WebP) whose alpha varies
 * (an all-opaque alpha plane could be dropped by the WebP encoder itself).
 */
const rgbaPng = (seed: number) => {
  const pixels = Buffer.alloc(64 * 64 * 4);
  let state = seed;
  const noise = () => (state = (state * 1103515245 + 12345) >>> 0) >>> 24;
  for (let i = 0; i < 64 * 64; i++) pixels.set([noise(), noise(), noise(), 128 + (i % 64)], i * 4);
  return sharp(pixels, { raw: { width: 64, height: 64, channels: 4 } })
    .png()
    .toBuffer();
};

it('drops the alpha plane of a texture only OPAQUE materials use, keeps it where BLEND or MASK reads it', async () => {
  const document = new Document();
  const texture = async (name: string, seed: number) =>
    document
      .createTexture(name)
      .setImage(await rgbaPng(seed))
      .setMimeType('image/png');
  const [opaque, blend, mask, shared] = await Promise.all([
    texture('opaque', 10),
    texture('blend', 90),
    texture('mask', 170),
    texture('shared', 250),
  ]);
  const material = (mode: ReturnType<Material['getAlphaMode']>, map: typeof opaque) =>
    document.createMaterial().setAlphaMode(mode).setBaseColorTexture(map);
  material('OPAQUE', opaque);
  material('BLEND', blend);
  material('MASK', mask);
  // Used opaque by one material and blended by another: the alpha is read.
  material('OPAQUE', shared);
  material('BLEND', shared);
  await startTextureCompression(document);
  const alphaOf = async (t: typeof opaque) => {
    expect(t.getMimeType(), t.getName()).toBe('image/webp');
    return (await sharp(t.getImage()!).metadata()).hasAlpha;
  };
  expect(await Promise.all([opaque, blend, mask, shared].map(alphaOf))).toEqual([false, true, true, true]);
});
