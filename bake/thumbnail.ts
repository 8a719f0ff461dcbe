/**
 * Preview images: the original is published as is (image_url); the thumbnail is a 512 px wide
 * WebP at quality 80 (spec). Headers are checked before anything is decoded, so a huge or broken
 * image fails its room with one line instead of exhausting memory.
 */
import sharp, { type Metadata } from 'sharp';
import type { FileExt } from '../artifacts/format.ts';
import { OPTIMIZER_SETTINGS } from './settings.ts';

export const THUMBNAIL = { width: 512, quality: 80 } as const;

/** A preview image that cannot be used; one line for operators. */
export class ImageError extends Error {
  override name = 'ImageError';
}

const EXT_BY_FORMAT: Record<string, FileExt> = { png: 'png', jpeg: 'jpg', webp: 'webp', svg: 'svg', avif: 'avif' };

export interface PreviewImage {
  ext: FileExt;
  width: number;
  height: number;
}

/** Identify a preview image from its header and check its declared size. */
export async function inspectPreview(image: Uint8Array, maxPixels: number = OPTIMIZER_SETTINGS.maxTexturePixels): Promise<PreviewImage> {
  let meta: Metadata;
  try {
    meta = await sharp(image).metadata();
  } catch (err) {
    throw new ImageError(`preview image is not a readable image (${(err as Error).message.split('\n')[0]})`);
  }
  const format = meta.format === 'heif' && meta.compression === 'av1' ? 'avif' : meta.format;
  const ext = format ? EXT_BY_FORMAT[format] : undefined;
  if (!ext) throw new ImageError(`preview image format ${format ?? 'unknown'} is not supported (png, jpeg, webp, avif or svg)`);
  const { width, height } = meta;
  if (!width || !height) throw new ImageError('preview image has no dimensions');
  if (width * height > maxPixels) throw new ImageError(`preview image declares ${width}×${height} pixels, over the limit of ${maxPixels} pixels`);
  return { ext, width, height };
}

/** The 512 px wide WebP thumbnail of a preview image. */
export async function makeThumbnail(image: Uint8Array, maxPixels: number = OPTIMIZER_SETTINGS.maxTexturePixels): Promise<Uint8Array> {
  await inspectPreview(image, maxPixels);
  try {
    return await sharp(image, { limitInputPixels: maxPixels })
      .resize({ width: THUMBNAIL.width })
      .webp({ quality: THUMBNAIL.quality })
      .toBuffer();
  } catch (err) {
    throw new ImageError(`preview image cannot be decoded (${(err as Error).message.split('\n')[0]})`);
  }
}
