/**
 * Media normalization (spec + decisions), as pure functions from the stored marketplace record to
 * the public Artwork:
 *  1. dead hosts (openseauserdata.com and subdomains) → the first live URL of the record:
 *     display_image_url, image_url, then the animation URLs;
 *  2. square-crop CDN variants (i2c.seadn.io) → original_image_url when present, alive and a still
 *     image (not video / model / html); square dimensions reported for the crop are dropped;
 *  3. ratio = width / height of the first trustworthy dimensions (still image, then animation),
 *     never from a square crop; 1 when unknown;
 *  4. ipfs://X and ipfs://ipfs/X → <gateway>/ipfs/X.
 */
import type { Artwork, Media } from '../artifacts/format.ts';
import type { ContentArtwork } from './content.ts';

const DEAD_HOSTS = ['openseauserdata.com'];
const SQUARE_CROP_HOSTS = ['i2c.seadn.io'];

const hostOf = (url: string): string | null => {
  try {
    return new URL(url).hostname.toLowerCase();
  } catch {
    return null;
  }
};
const onHost = (url: string, hosts: string[]) => {
  const host = hostOf(url);
  return host !== null && hosts.some((h) => host === h || host.endsWith(`.${h}`));
};

export const isDeadHost = (url: string): boolean => onHost(url, DEAD_HOSTS);
export const isSquareCrop = (url: string): boolean => onHost(url, SQUARE_CROP_HOSTS);
const isLive = (url: string | null | undefined): url is string => typeof url === 'string' && url.length > 0 && !isDeadHost(url);

/** `ipfs://X` and `ipfs://ipfs/X` → `<gateway>/ipfs/X`; other URLs unchanged. */
export function resolveIpfs(url: string, gateway: string): string {
  const match = /^ipfs:\/\/(?:ipfs\/)?(.+)$/i.exec(url);
  return match ? `${gateway.replace(/\/+$/, '')}/ipfs/${match[1]}` : url;
}

const MIME_BY_EXTENSION: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  avif: 'image/avif',
  svg: 'image/svg+xml',
  mp4: 'video/mp4',
  m4v: 'video/mp4',
  webm: 'video/webm',
  mov: 'video/quicktime',
  mp3: 'audio/mpeg',
  wav: 'audio/wav',
  ogg: 'audio/ogg',
  glb: 'model/gltf-binary',
  gltf: 'model/gltf+json',
  html: 'text/html',
  htm: 'text/html',
};

/** The MIME type a URL's file extension names, or null. */
export function mimeFromUrl(url: string): string | null {
  let path = url;
  try {
    path = new URL(url).pathname;
  } catch {
    /* not absolute: use as is */
  }
  const ext = /\.([a-z0-9]+)$/i.exec(path)?.[1]?.toLowerCase();
  return ext ? (MIME_BY_EXTENSION[ext] ?? null) : null;
}

/** Media.type from a MIME type: image, video, audio, model or html. */
export function mediaType(contentType: string): string {
  if (contentType === 'text/html') return 'html';
  const top = contentType.split('/')[0]!;
  return ['image', 'video', 'audio', 'model'].includes(top) ? top : 'image';
}

const isStillImage = (url: string, declared: string | null) => {
  const mime = declared ?? mimeFromUrl(url);
  return mime === null || mime.startsWith('image/');
};

function media(url: string, declared: string | null, width: number | null, height: number | null, gateway: string): Media {
  const contentType = declared ?? mimeFromUrl(url) ?? 'application/octet-stream';
  return { url: resolveIpfs(url, gateway), type: mediaType(contentType), content_type: contentType, width, height };
}

export interface NormalizeOptions {
  ipfsGateway: string;
}

/** The public Artwork of a stored record (rules 1–4 above). */
export function normalizeArtwork(record: ContentArtwork, options: NormalizeOptions): Artwork {
  const gateway = options.ipfsGateway;
  const animationUrls = [record.display_animation_url, record.animation_url];

  // The still image: what the store holds, with the dimensions reported for it.
  let url = record.image_url ?? record.display_image_url;
  let contentType = record.content_type;
  let width = record.width;
  let height = record.height;

  // 1. A dead host: the first live URL of the record.
  if (url && isDeadHost(url)) {
    const replacement = [record.display_image_url, record.image_url].find(isLive) ?? animationUrls.find(isLive) ?? null;
    if (replacement && animationUrls.includes(replacement)) {
      contentType = record.animation_content_type;
      width = record.animation_width;
      height = record.animation_height;
    } else if (replacement !== url) {
      contentType = null; // another file: its type comes from its own name
    }
    url = replacement;
  }

  // 2. A square crop: the original file when it is a live still image; crop dimensions are not the work's.
  if (url && isSquareCrop(url)) {
    if (width !== null && width === height) {
      width = null;
      height = null;
    }
    const original = record.original_image_url;
    if (isLive(original) && isStillImage(original, null)) {
      url = original;
      contentType = null;
    }
  }

  const still = url ? media(url, contentType, width, height, gateway) : null;
  const animationUrl = animationUrls.find(isLive) ?? null;
  const animation = animationUrl
    ? media(animationUrl, record.animation_content_type, record.animation_width, record.animation_height, gateway)
    : null;

  // 3. Ratio from the first trustworthy dimensions.
  const dims = [still, animation].find((m) => m && m.width && m.height);
  const ratio = dims ? dims.width! / dims.height! : 1;

  return {
    id: record.id,
    name: record.name,
    artist_name: record.artist_name,
    collection: record.collection,
    media: still,
    animation,
    ratio,
    marketplace_url: record.marketplace_url,
  };
}
