/**
 * Media normalization (spec + decisions), as pure functions from the stored artwork (its media
 * blobs and marketplace record, bake/content.ts) to the public Artwork. The still is the first of
 * media_info, display_media_info that is not a video or a model; the animation is
 * display_animation_info; then:
 *  1. dead hosts (openseauserdata.com and subdomains) → the first live URL of the record:
 *     display_image_url, image_url, then the animation URLs;
 *  2. square-crop CDN variants (i2c.seadn.io) → original_image_url when present, alive and a still
 *     image (not video / model / html); square dimensions reported for the crop are dropped;
 *  3. ratio = width / height of the first trustworthy dimensions (still image, then animation),
 *     never from a square crop; 1 when unknown;
 *  4. ipfs://X and ipfs://ipfs/X → <gateway>/ipfs/X.
 */
import type { Artwork, Media } from '../artifacts/format.ts';
import type { ContentArtwork, ContentMedia } from './content.ts';

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
function mediaType(contentType: string): string {
  if (contentType === 'text/html') return 'html';
  const top = contentType.split('/')[0]!;
  return ['image', 'video', 'audio', 'model'].includes(top) ? top : 'image';
}

const isStillImage = (url: string, declared: string | null) => {
  const mime = declared ?? mimeFromUrl(url);
  return mime === null || mime.startsWith('image/');
};

/** A blob that is a video or a 3D model (by the store's type, else its MIME type): never the still. */
const isMotionOrModel = (blob: ContentMedia): boolean => {
  const type = blob.type?.toLowerCase() ?? null;
  if (type !== null && type !== '') return type.startsWith('video') || type.startsWith('model') || type === '3d';
  const mime = blob.content_type ?? mimeFromUrl(blob.url);
  return mime !== null && (mime.startsWith('video/') || mime.startsWith('model/'));
};

/** A file of the work on its way to becoming a public Media. */
interface Candidate {
  url: string;
  /** MIME type the store declared for this very URL, or null (then it comes from the URL's name). */
  contentType: string | null;
  /** The store's kind for this very URL, or null. */
  kind: string | null;
  width: number | null;
  height: number | null;
}

const fromBlob = (blob: ContentMedia): Candidate => ({
  url: blob.url,
  contentType: blob.content_type,
  kind: blob.type,
  width: blob.width,
  height: blob.height,
});

function media(c: Candidate, gateway: string): Media {
  const contentType = c.contentType ?? mimeFromUrl(c.url);
  return {
    url: resolveIpfs(c.url, gateway),
    type: contentType ? mediaType(contentType) : (c.kind?.toLowerCase() ?? 'image'),
    content_type: contentType ?? 'application/octet-stream',
    width: c.width,
    height: c.height,
  };
}

export interface NormalizeOptions {
  ipfsGateway: string;
}

/**
 * The work's animation: display_animation_info; on a dead host, the first live animation URL of
 * the marketplace record (same work: the blob's dimensions still hold, its MIME type does not).
 */
function animationOf(record: ContentArtwork): Candidate | null {
  const blob = record.display_animation_info;
  if (!blob) return null;
  if (!isDeadHost(blob.url)) return fromBlob(blob);
  const live = [record.marketplace.display_animation_url, record.marketplace.animation_url].find(isLive);
  return live ? { ...fromBlob(blob), url: live, contentType: null, kind: null } : null;
}

/**
 * The still as the store holds it: the first of media_info, display_media_info that is not a video
 * or a model. Without one, the marketplace record's display image, then image (live still images
 * only), without dimensions.
 */
function storedStill(record: ContentArtwork): Candidate | null {
  const blob = [record.media_info, record.display_media_info].find((b) => b && !isMotionOrModel(b));
  if (blob) return fromBlob(blob);
  const url = [record.marketplace.display_image_url, record.marketplace.image_url].find((u) => isLive(u) && isStillImage(u, null));
  return url ? { url, contentType: null, kind: null, width: null, height: null } : null;
}

/** The public Artwork of a stored record (rules 1–4 above). */
export function normalizeArtwork(record: ContentArtwork, options: NormalizeOptions): Artwork {
  const gateway = options.ipfsGateway;
  const market = record.marketplace;
  const animation = animationOf(record);
  let still = storedStill(record);

  // 1. A dead host: the first live URL of the marketplace record (images, then animations).
  if (still && isDeadHost(still.url)) {
    const animationUrls = [animation?.url, market.display_animation_url, market.animation_url];
    const image = [market.display_image_url, market.image_url].find(isLive);
    const motion = image ? undefined : animationUrls.find(isLive);
    if (image)
      still = { ...still, url: image, contentType: null, kind: null }; // same work, another file
    else if (motion && animation)
      still = { ...animation, url: motion, ...(motion === animation.url ? {} : { contentType: null, kind: null }) };
    else if (motion) still = { url: motion, contentType: null, kind: null, width: null, height: null };
    else still = null;
  }

  // 2. A square crop: the original file when it is a live still image; crop dimensions are not the work's.
  if (still && isSquareCrop(still.url)) {
    if (still.width !== null && still.width === still.height) still = { ...still, width: null, height: null };
    const original = market.original_image_url;
    if (isLive(original) && isStillImage(original, null)) still = { ...still, url: original, contentType: null, kind: null };
  }

  const stillMedia = still ? media(still, gateway) : null;
  const animationMedia = animation ? media(animation, gateway) : null;

  // 3. Ratio from the first trustworthy dimensions.
  const dims = [stillMedia, animationMedia].find((m) => m?.width && m.height);
  const ratio = dims ? dims.width! / dims.height! : 1;

  return {
    id: record.id,
    name: record.name,
    artist_name: record.artist_name,
    collection: record.collection,
    media: stillMedia,
    animation: animationMedia,
    ratio,
    marketplace_url: record.marketplace_url,
  };
}
