/**
 * Textures encoded without an alpha channel when no material reads their alpha. glTF-Transform's
 * getTextureChannelMask knows which channels each use reads: a baseColorTexture of an OPAQUE
 * material has its alpha ignored by every renderer (glTF 2.0, alphaMode), occlusion reads R, and
 * so on. Cube-room's baked light map is such a texture (RGBA, alpha 230–255, material OPAQUE):
 * without its alpha plane its 2048² WebP decodes in Chromium in 33 ms instead of 46, and the page
 * is spared a 12 ms main-thread pass that finishing a bitmap with alpha costs (premultiplyAlpha
 * 'none'), in every variant alike; the file is 0.4 % smaller and its colour pixels the same.
 */
import { type Texture, TextureChannel } from '@gltf-transform/core';
import { getTextureChannelMask } from '@gltf-transform/functions';
import sharp, { type SharpOptions } from 'sharp';

/** True when no use of the texture reads its alpha channel (an unused texture included). */
export const alphaUnread = (texture: Texture): boolean => (getTextureChannelMask(texture) & TextureChannel.A) === 0;

const withoutAlpha = ((input?: Parameters<typeof sharp>[0], options?: SharpOptions) => sharp(input, options).removeAlpha()) as typeof sharp;

/** The encoder glTF-Transform's compressTexture is given: sharp, dropping alpha when nothing reads it. */
export const textureEncoder = (dropAlpha: boolean): typeof sharp => (dropAlpha ? withoutAlpha : sharp);
