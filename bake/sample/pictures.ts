/**
 * The sample museum's pictures: artworks whose images the project draws itself (SVG rendered by
 * sharp: gradients and shapes, no text, so no font decides a pixel), written into the content
 * source as files and referenced by relative path. The bake stores them in the artifacts like any
 * room file, and the server serves them from /files, so a fresh clone shows a museum with pictures,
 * offline. Same bytes on every run: every choice comes from the artwork's id through the seeded PRNG.
 */
import sharp from 'sharp';
import { mulberry32 } from '../../common/random.ts';
import type { ContentArtwork } from '../content.ts';

type Composition = 'bands' | 'circles' | 'grid' | 'waves' | 'horizon' | 'rays';
type Encoding = 'png' | 'jpg' | 'webp';

interface PictureSpec {
  id: number;
  name: string;
  artist: string;
  /** The museum collection (collections.json slug). */
  museumCollection: string;
  composition: Composition;
  /** Base hue, degrees. */
  hue: number;
  width: number;
  height: number;
  encoding: Encoding;
}

// Small enough that writing the sample stays quick (every bake test writes it), big enough for a frame.
const PORTRAIT = { width: 480, height: 640 };
const LANDSCAPE = { width: 660, height: 440 };
const SQUARE = { width: 560, height: 560 };
const WIDE = { width: 720, height: 360 };

const spec = (
  id: number,
  name: string,
  artist: string,
  museumCollection: string,
  composition: Composition,
  hue: number,
  size: { width: number; height: number },
  encoding: Encoding = 'jpg',
): PictureSpec => ({ id, name, artist, museumCollection, composition, hue, ...size, encoding });

/** Twenty-four works in three collections, in every frame shape and three file formats. */
export const SAMPLE_PICTURES: PictureSpec[] = [
  spec(201, 'Vermilion Bands', 'Ada Quill', 'founders-portraits', 'bands', 8, PORTRAIT),
  spec(202, 'Harbour at Dusk', 'Bo Lindqvist', 'founders-landscapes', 'horizon', 24, LANDSCAPE),
  spec(203, 'Three Moons', 'Chen Wu', 'generative', 'circles', 212, SQUARE, 'png'),
  spec(204, 'Grid in Ochre', 'Dana Roe', 'generative', 'grid', 40, SQUARE),
  spec(205, 'Tide Lines', 'Eli Park', 'founders-landscapes', 'waves', 196, WIDE),
  spec(206, 'Morning Rays', 'Fay Ortiz', 'founders-landscapes', 'rays', 48, LANDSCAPE, 'webp'),
  spec(207, 'Portrait in Teal', 'Ada Quill', 'founders-portraits', 'bands', 176, PORTRAIT),
  spec(208, 'Red Hills', 'Bo Lindqvist', 'founders-landscapes', 'horizon', 356, LANDSCAPE),
  spec(209, 'Orbit Study', 'Chen Wu', 'generative', 'circles', 280, SQUARE, 'png'),
  spec(210, 'Blue Composition', 'Dana Roe', 'generative', 'grid', 224, PORTRAIT),
  spec(211, 'Violet Current', 'Eli Park', 'generative', 'waves', 268, LANDSCAPE),
  spec(212, 'Noon', 'Fay Ortiz', 'founders-landscapes', 'rays', 60, SQUARE, 'webp'),
  spec(213, 'Rose Field', 'Gil Hart', 'founders-portraits', 'bands', 332, LANDSCAPE),
  spec(214, 'Glacier Evening', 'Hana Sato', 'founders-landscapes', 'horizon', 200, WIDE),
  spec(215, 'Eclipse', 'Chen Wu', 'generative', 'circles', 28, PORTRAIT, 'png'),
  spec(216, 'Lemon Grid', 'Dana Roe', 'generative', 'grid', 56, LANDSCAPE),
  spec(217, 'Green Swell', 'Eli Park', 'founders-landscapes', 'waves', 140, PORTRAIT),
  spec(218, 'Fan of Light', 'Fay Ortiz', 'generative', 'rays', 300, PORTRAIT, 'webp'),
  spec(219, 'Sienna Stripes', 'Gil Hart', 'founders-portraits', 'bands', 20, SQUARE),
  spec(220, 'Night Lake', 'Hana Sato', 'founders-landscapes', 'horizon', 236, LANDSCAPE),
  spec(221, 'Saffron Rings', 'Ada Quill', 'generative', 'circles', 44, LANDSCAPE, 'png'),
  spec(222, 'Plan in Red and Blue', 'Bo Lindqvist', 'generative', 'grid', 0, SQUARE),
  spec(223, 'Cold Water', 'Eli Park', 'founders-landscapes', 'waves', 186, SQUARE),
  spec(224, 'Dawn Chorus', 'Fay Ortiz', 'founders-portraits', 'rays', 16, WIDE, 'webp'),
];

/** Where a picture lives in the content source. */
export const picturePath = (p: Pick<PictureSpec, 'id' | 'encoding'>): string => `pictures/${p.id}.${p.encoding}`;

const MIME: Record<Encoding, string> = { png: 'image/png', jpg: 'image/jpeg', webp: 'image/webp' };
const MARKET = 'https://marketplace.example/assets/ethereum/0x5a3e0000000000000000000000000000000000bb';

/** The content records of the pictures: the still is the file in the content source. */
export const pictureArtworks = (): ContentArtwork[] =>
  SAMPLE_PICTURES.map((p) => ({
    id: p.id,
    name: p.name,
    artist_name: p.artist,
    collection: 'museum-studio',
    museum_collection: p.museumCollection,
    marketplace_url: `${MARKET}/${p.id}`,
    media_info: { url: picturePath(p), type: 'image', content_type: MIME[p.encoding], width: p.width, height: p.height },
    display_media_info: null,
    display_animation_info: null,
    marketplace: { image_url: null, display_image_url: null, original_image_url: null, animation_url: null, display_animation_url: null },
  }));

const hsl = (h: number, s: number, l: number) => `hsl(${((h % 360) + 360) % 360}, ${s}%, ${Math.round(l)}%)`;
const f = (n: number) => n.toFixed(1);
const rect = (x: number, y: number, w: number, h: number, fill: string, extra = '') =>
  `<rect x="${f(x)}" y="${f(y)}" width="${f(w)}" height="${f(h)}" fill="${fill}"${extra}/>`;
const circle = (cx: number, cy: number, r: number, fill: string, opacity = 1) =>
  `<circle cx="${f(cx)}" cy="${f(cy)}" r="${f(r)}" fill="${fill}" fill-opacity="${opacity}"/>`;

/** The shapes of one composition, drawn over its gradient ground. */
function shapes(p: PictureSpec, random: () => number): string[] {
  const { width: w, height: h, hue } = p;
  const out: string[] = [];
  switch (p.composition) {
    case 'bands': {
      const n = 3 + Math.floor(random() * 3);
      for (let i = 0; i < n; i++) {
        const y = (h * (i + 0.15)) / n;
        out.push(rect(w * 0.08, y, w * 0.84, (h / n) * 0.7, hsl(hue + i * 14, 70, 30 + random() * 35), ' rx="12" fill-opacity="0.85"'));
      }
      break;
    }
    case 'circles':
      for (let i = 0; i < 3; i++) {
        const r = Math.min(w, h) * (0.12 + random() * 0.16);
        out.push(circle(w * (0.2 + random() * 0.6), h * (0.2 + random() * 0.6), r, hsl(hue + 40 * i + 180, 65, 55 + i * 10), 0.8));
      }
      break;
    case 'grid': {
      const cols = 3 + Math.floor(random() * 2);
      const rows = 3 + Math.floor(random() * 2);
      for (let c = 0; c < cols; c++) {
        for (let r = 0; r < rows; r++) {
          const accent = random() < 0.3;
          const fill = accent ? hsl(hue + Math.floor(random() * 3) * 120, 75, 48) : hsl(hue, 15, 92);
          out.push(rect((c * w) / cols + 6, (r * h) / rows + 6, w / cols - 12, h / rows - 12, fill));
        }
      }
      break;
    }
    case 'waves':
      for (let i = 0; i < 6; i++) {
        const y0 = h * (0.2 + i * 0.13);
        const amp = h * (0.03 + random() * 0.04);
        const curve = `C ${f(w * 0.25)} ${f(y0 - amp * 2)}, ${f(w * 0.5)} ${f(y0 + amp * 2)}, ${f(w)} ${f(y0)}`;
        const d = `M0 ${f(y0)} ${curve} L ${w} ${h} L 0 ${h} Z`;
        out.push(`<path d="${d}" fill="${hsl(hue + i * 6, 60, 70 - i * 8)}" fill-opacity="0.55"/>`);
      }
      break;
    case 'horizon': {
      const horizon = h * (0.55 + random() * 0.15);
      out.push(circle(w * (0.25 + random() * 0.5), horizon - h * 0.12, Math.min(w, h) * 0.11, hsl(hue + 30, 90, 72)));
      out.push(rect(0, horizon, w, h - horizon, hsl(hue + 190, 45, 22)));
      const hill = `M0 ${f(horizon)} Q ${f(w * 0.3)} ${f(horizon - h * 0.18)} ${f(w * 0.55)} ${f(horizon)} T ${w} ${f(horizon)} Z`;
      out.push(`<path d="${hill}" fill="${hsl(hue + 200, 35, 30)}"/>`);
      break;
    }
    case 'rays': {
      const cx = w * (0.3 + random() * 0.4);
      for (let i = 0; i < 12; i++) {
        const a0 = Math.PI + (i / 12) * Math.PI;
        const a1 = a0 + Math.PI / 24;
        const r = Math.max(w, h) * 1.2;
        const at = (a: number) => `${f(cx + Math.cos(a) * r)} ${f(h + Math.sin(a) * r)}`;
        const d = `M ${f(cx)} ${h} L ${at(a0)} L ${at(a1)} Z`;
        out.push(`<path d="${d}" fill="${hsl(hue + i * 5, 85, 80)}" fill-opacity="0.45"/>`);
      }
      out.push(circle(cx, h, Math.min(w, h) * 0.18, hsl(hue + 20, 95, 62)));
      break;
    }
  }
  return out;
}

/** The picture's SVG: a diagonal two-colour gradient ground, its shapes, a thin inner border. */
function pictureSvg(p: PictureSpec): string {
  const random = mulberry32(p.id * 7919);
  const { width: w, height: h, hue } = p;
  const stops = `<stop offset="0" stop-color="${hsl(hue, 70, 62)}"/><stop offset="1" stop-color="${hsl(hue + 50, 55, 28)}"/>`;
  const ground = `<defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1">${stops}</linearGradient></defs>${rect(0, 0, w, h, 'url(#g)')}`;
  const border = rect(8, 8, w - 16, h - 16, 'none', ` stroke="${hsl(hue, 20, 96)}" stroke-opacity="0.5" stroke-width="4"`);
  const body = `${ground}${shapes(p, random).join('')}${border}`;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}">${body}</svg>`;
}

/** The picture's file bytes, in its encoding. */
export async function renderPicture(p: PictureSpec): Promise<Buffer> {
  const image = sharp(Buffer.from(pictureSvg(p)));
  if (p.encoding === 'png') return image.png({ compressionLevel: 9, palette: true }).toBuffer();
  if (p.encoding === 'webp') return image.webp({ quality: 82 }).toBuffer();
  return image.jpeg({ quality: 85, mozjpeg: true }).toBuffer();
}
