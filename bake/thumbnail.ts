/**
 * Preview images: a raster original is published as is (image_url); an SVG is rasterized to PNG
 * first (an SVG served from the API's origin could run script), after refusing any reference to
 * something outside it. The thumbnail is a 512 px wide WebP at quality 80 (spec). Headers are
 * checked before anything is decoded, so a huge or broken image fails its room with one line
 * instead of exhausting memory.
 */
import { gunzipSync } from 'node:zlib';
import sharp, { type Metadata } from 'sharp';
import type { FileExt } from '../artifacts/format.ts';
import { OPTIMIZER_SETTINGS } from './settings.ts';

const THUMBNAIL = { width: 512, quality: 80 } as const;
/** SVG previews are published as PNGs this long on their longer side. */
export const SVG_RASTER_SIZE = 2048;

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
  if (width * height > maxPixels)
    throw new ImageError(`preview image declares ${width}×${height} pixels, over the limit of ${maxPixels} pixels`);
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

/** What is published as image_url: the bytes and their extension (never SVG). */
export interface PublishedPreview {
  bytes: Uint8Array;
  ext: FileExt;
}

/** The preview as published: raster images as they are, SVG rasterized to PNG. */
export async function publishablePreview(
  image: Uint8Array,
  maxPixels: number = OPTIMIZER_SETTINGS.maxTexturePixels,
): Promise<PublishedPreview> {
  const { ext, width, height } = await inspectPreview(image, maxPixels);
  if (ext !== 'svg') return { bytes: image, ext };
  const svg = svgText(image);
  const scale = SVG_RASTER_SIZE / Math.max(width, height);
  const size = { width: Math.max(1, Math.round(width * scale)), height: Math.max(1, Math.round(height * scale)) };
  try {
    const png = await sharp(Buffer.from(svg), { density: Math.min(100_000, 72 * scale), limitInputPixels: maxPixels })
      .resize({ ...size, fit: 'fill' })
      .png()
      .toBuffer();
    return { bytes: png, ext: 'png' };
  } catch (err) {
    throw new ImageError(`preview SVG cannot be rendered (${(err as Error).message.split('\n')[0]})`);
  }
}

/** Attribute and CSS references an SVG may keep: to itself (`#id`) or inline data. */
const LOCAL_REFERENCE = /^\s*(?:#|data:)/i;

/**
 * The SVG's text, refused when it names anything outside itself. librsvg (sharp) loads nothing
 * external from a buffer anyway — this keeps it so whatever librsvg version runs.
 */
function svgText(image: Uint8Array): string {
  let bytes = Buffer.from(image);
  if (bytes[0] === 0x1f && bytes[1] === 0x8b) {
    try {
      bytes = gunzipSync(bytes, { maxOutputLength: 16 * 1024 * 1024 });
    } catch {
      throw new ImageError('preview SVG is compressed and does not decompress within 16 MB');
    }
  }
  const text = bytes.toString('utf8');
  const refuse = (what: string) => new ImageError(`preview SVG refused: it references something outside itself (${what})`);
  for (const m of text.matchAll(/\bhref\s*=\s*(["'])([\s\S]*?)\1/gi))
    if (!LOCAL_REFERENCE.test(m[2]!)) throw refuse(`href "${m[2]!.slice(0, 80)}"`);
  for (const m of text.matchAll(/url\(\s*(["']?)([^)]*?)\1\s*\)/gi))
    if (!LOCAL_REFERENCE.test(m[2]!)) throw refuse(`url(${m[2]!.slice(0, 80)})`);
  if (/@import/i.test(text)) throw refuse('@import');
  if (/<!ENTITY/i.test(text)) throw refuse('an entity declaration');
  if (/<\?xml-stylesheet/i.test(text)) throw refuse('a stylesheet');
  // CSS escapes could spell url( or @import past the checks above.
  if (/\\[0-9a-f]/i.test(text)) throw refuse('a CSS escape');
  return text;
}
