// A room model that asks the bake for a lot of native image work: `count` distinct size² textures,
// each on a wall of its own, every one decoded, resized and encoded by sharp in the bake.
import { crc32 } from 'node:zlib';
import sharp from 'sharp';
import { writeGlb } from '../../bake/gltf-io.ts';
import { RoomBuilder } from '../../bake/sample/room-builder.ts';

/** The same PNG with a text chunk after its header: other bytes, the same picture. */
function withText(png: Buffer, text: string): Buffer {
  const data = Buffer.concat([Buffer.from('tEXt', 'latin1'), Buffer.from(`Comment\0${text}`, 'latin1')]);
  const chunk = Buffer.alloc(data.length + 8);
  chunk.writeUInt32BE(data.length - 4, 0);
  data.copy(chunk, 4);
  chunk.writeUInt32BE(crc32(data), data.length + 4);
  const afterHeader = 8 + 25; // signature, IHDR chunk
  return Buffer.concat([png.subarray(0, afterHeader), chunk, png.subarray(afterHeader)]);
}

export async function manyTexturesGlb(count: number, size: number): Promise<Uint8Array> {
  // Encoded once; each texture differs by its bytes, so none is deduplicated.
  const png = await sharp({ create: { width: size, height: size, channels: 3, background: '#8a6d4f' } })
    .png({ compressionLevel: 1 })
    .toBuffer();
  const b = new RoomBuilder('Textured');
  b.floorAndCeiling('Textured', [-3, -3], [3, 3], 3, b.material('Floor'), b.material('Ceiling'));
  for (let i = 0; i < count; i++) {
    const x = -3 + (6 * i) / count;
    b.wall(`Wall_${i}`, [x + 6 / count, -3], [x, -3], 3, 0.2, b.material(`Mural_${i}`, { baseColorImage: withText(png, `texture ${i}`) }));
  }
  b.slot('Slot_001', { center: [0, 1.5, -2.89], normal: [0, 0, 1], up: [0, 1, 0], width: 1, height: 0.8 });
  return writeGlb(b.document);
}
