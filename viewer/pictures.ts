/**
 * Artwork pictures as textures: fetched from the server's same-origin texture variants and decoded
 * off the main thread; anything that goes wrong (no image, a failed request, an undecodable body)
 * gives a titled placeholder card instead, so the scene never breaks.
 */
import { CanvasTexture, SRGBColorSpace, type Texture } from 'three';
import type { ViewArtwork } from './page-data.ts';

const PLACEHOLDER_BACKGROUND = '#3a3f47';

export async function pictureTexture(artwork: ViewArtwork): Promise<{ texture: Texture; placeholder: boolean }> {
  if (artwork.textureUrl) {
    try {
      const res = await fetch(artwork.textureUrl);
      if (res.ok) {
        const bitmap = await createImageBitmap(await res.blob(), { imageOrientation: 'flipY' });
        const texture = new CanvasTexture(bitmap);
        texture.flipY = false;
        texture.colorSpace = SRGBColorSpace;
        return { texture, placeholder: false };
      }
    } catch {
      // fall through to the card
    }
  }
  return { texture: placeholderCard(artwork), placeholder: true };
}

/** A card with the work's title and artist, drawn at the artwork's ratio. */
function placeholderCard(artwork: Pick<ViewArtwork, 'title' | 'artist' | 'ratio'>): Texture {
  const ratio = artwork.ratio > 0 && Number.isFinite(artwork.ratio) ? Math.min(4, Math.max(0.25, artwork.ratio)) : 1;
  const canvas = document.createElement('canvas');
  canvas.width = Math.round(ratio >= 1 ? 512 : 512 * ratio);
  canvas.height = Math.round(ratio >= 1 ? 512 / ratio : 512);
  const g = canvas.getContext('2d')!;
  g.fillStyle = PLACEHOLDER_BACKGROUND;
  g.fillRect(0, 0, canvas.width, canvas.height);
  g.fillStyle = '#f0ede6';
  g.textAlign = 'center';
  g.textBaseline = 'middle';
  const fit = (text: string, size: number, y: number) => {
    g.font = `${size}px system-ui, sans-serif`;
    let shown = text;
    while (shown.length > 1 && g.measureText(shown).width > canvas.width * 0.86) shown = `${shown.slice(0, -2)}…`;
    g.fillText(shown, canvas.width / 2, y);
  };
  fit(artwork.title, 34, canvas.height / 2 - 22);
  if (artwork.artist) fit(artwork.artist, 24, canvas.height / 2 + 22);
  g.font = '18px system-ui, sans-serif';
  g.fillStyle = '#aab0b8';
  g.fillText('image unavailable', canvas.width / 2, canvas.height - 28);
  const texture = new CanvasTexture(canvas);
  texture.colorSpace = SRGBColorSpace;
  return texture;
}
