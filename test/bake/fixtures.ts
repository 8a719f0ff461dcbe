/**
 * Inputs for the bake tests: the shared third-party models, and broken models built from valid
 * ones (truncated, wrong magic, garbage JSON, buffer past the end, a texture declaring 30000² px).
 */
import { readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import validator from 'gltf-validator';
import { writeGlb } from '../../bake/gltf-io.ts';
import { RoomBuilder } from '../../bake/sample/room-builder.ts';

export const SHARED_ASSETS = resolve(dirname(fileURLToPath(import.meta.url)), '../../../shared/assets');

/** Every .glb / .gltf under ../shared/assets. */
export function sharedModels(): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (/\.(glb|gltf)$/i.test(name)) found.push(path);
    }
  };
  walk(SHARED_ASSETS);
  return found;
}

/** Khronos validator: number of errors and the first few messages. */
export async function validate(glb: Uint8Array): Promise<{ errors: number; warnings: number; messages: string[] }> {
  const report = await validator.validateBytes(new Uint8Array(glb), { maxIssues: 50 });
  const messages = (report.issues.messages as Array<{ severity: number; code: string; message: string; pointer?: string }>)
    .filter((m) => m.severity === 0)
    .map((m) => `${m.code} ${m.message} ${m.pointer ?? ''}`);
  return { errors: report.issues.numErrors, warnings: report.issues.numWarnings, messages };
}

/** A small valid room with two authored slots. */
export async function smallRoomGlb(name = 'Small'): Promise<Uint8Array> {
  const b = new RoomBuilder(name);
  const wall = b.material('Wall');
  b.floorAndCeiling(name, [-3, -3], [3, 3], 3, b.material('Floor'), b.material('Ceiling'));
  b.wall('North', [3, -3], [-3, -3], 3, 0.2, wall);
  b.wall('South', [-3, 3], [3, 3], 3, 0.2, wall);
  b.wall('East', [3, 3], [3, -3], 3, 0.2, wall);
  b.wall('West', [-3, -3], [-3, 3], 3, 0.2, wall);
  b.slot('Slot_001', { center: [0, 1.5, -2.89], normal: [0, 0, 1], up: [0, 1, 0], width: 1, height: 0.8 });
  b.slot('Slot_002', { center: [0, 1.5, 2.89], normal: [0, 0, -1], up: [0, 1, 0], width: 1, height: 0.8 });
  return writeGlb(b.document);
}

interface GlbParts {
  json: Record<string, unknown> & { buffers?: Array<{ byteLength: number }> };
  bin: Buffer | null;
}

export function splitGlb(glb: Uint8Array): GlbParts {
  const buf = Buffer.from(glb);
  const jsonLength = buf.readUInt32LE(12);
  const json = JSON.parse(buf.subarray(20, 20 + jsonLength).toString('utf8'));
  const binStart = 20 + jsonLength;
  const bin = buf.length > binStart + 8 ? buf.subarray(binStart + 8, binStart + 8 + buf.readUInt32LE(binStart)) : null;
  return { json, bin };
}

const pad = (data: Buffer, fill: number) => Buffer.concat([data, Buffer.alloc((4 - (data.length % 4)) % 4, fill)]);

/** Assemble a GLB from a JSON chunk payload (bytes, possibly invalid) and an optional BIN chunk. */
export function joinGlb(jsonChunk: Buffer, bin: Buffer | null): Buffer {
  const json = pad(jsonChunk, 0x20);
  const chunks = [Buffer.alloc(8), json];
  chunks[0]!.writeUInt32LE(json.length, 0);
  chunks[0]!.writeUInt32LE(0x4e4f534a, 4);
  if (bin) {
    const data = pad(bin, 0);
    const header = Buffer.alloc(8);
    header.writeUInt32LE(data.length, 0);
    header.writeUInt32LE(0x004e4942, 4);
    chunks.push(header, data);
  }
  const body = Buffer.concat(chunks);
  const header = Buffer.alloc(12);
  header.writeUInt32LE(0x46546c67, 0);
  header.writeUInt32LE(2, 4);
  header.writeUInt32LE(12 + body.length, 8);
  return Buffer.concat([header, body]);
}

export const truncatedGlb = (glb: Uint8Array) => Buffer.from(glb).subarray(0, Math.floor(glb.byteLength * 0.6));

export function wrongMagicGlb(glb: Uint8Array): Buffer {
  const copy = Buffer.from(glb);
  copy.write('gLTX', 0, 'latin1');
  return copy;
}

export function garbageJsonGlb(glb: Uint8Array): Buffer {
  const { bin } = splitGlb(glb);
  return joinGlb(Buffer.from('{"asset": {"version": "2.0"}, "meshes": [ \u0001\u0002 garbage'), bin);
}

/** The JSON declares a buffer longer than the BIN chunk really is. */
export function bufferPastEndGlb(glb: Uint8Array): Buffer {
  const { json, bin } = splitGlb(glb);
  json.buffers![0]!.byteLength = bin!.length + 4096;
  return joinGlb(Buffer.from(JSON.stringify(json)), bin);
}

function crc32(data: Buffer): number {
  let crc = 0xffffffff;
  for (const byte of data) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0xedb88320 : crc >>> 1;
  }
  return (crc ^ 0xffffffff) >>> 0;
}

function pngChunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

/** A tiny PNG whose header declares width×height pixels (the pixel data is not really there). */
function pngDeclaring(width: number, height: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', Buffer.from([0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01])),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A room whose wall texture declares 30000×30000 pixels. */
export async function hugeTextureGlb(): Promise<Uint8Array> {
  const b = new RoomBuilder('Huge');
  const wall = b.material('Mural', { baseColorImage: pngDeclaring(30000, 30000) });
  b.floorAndCeiling('Huge', [-2, -2], [2, 2], 3, b.material('Floor'), b.material('Ceiling'));
  b.wall('North', [2, -2], [-2, -2], 3, 0.2, wall);
  b.slot('Slot_001', { center: [0, 1.5, -1.89], normal: [0, 0, 1], up: [0, 1, 0], width: 1, height: 0.8 });
  return writeGlb(b.document);
}

/** A content-source room record of `model` with two onchain slots (the bake's input, rooms.json). */
export const contentRoom = (id: number, model: string) => ({
  id,
  title: model,
  architect: '',
  description: '',
  series: '',
  slots: 2,
  token_id: null,
  model,
  image: null,
});
