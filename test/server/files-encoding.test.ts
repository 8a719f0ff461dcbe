/**
 * `/files` sends GLB and JSON files br- or gzip-encoded from the siblings the bake precompressed
 * (decisions, "Clients of the HTTP API"): the encoding follows Accept-Encoding (br on a tie), every
 * representation has its own strong ETag and a 304, `Vary: Accept-Encoding`, the right length; a
 * Range request and a client accepting neither get the identity bytes. Real server, node:http.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { filePath, type FileRef, type Room } from '../../artifacts/format.ts';
import { writeGlb } from '../../bake/gltf-io.ts';
import { bakeRooms } from '../../bake/pipeline.ts';
import { RoomBuilder } from '../../bake/sample/room-builder.ts';
import { putContentFile } from '../../artifacts/store.ts';
import { nodeRequest, type RawResponse } from '../helpers/raw-http.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

let server: TestServer;
/** A compressible GLB-named file kept in memory, one streamed from disk (over 1 MiB), and a PNG. */
let small: { ref: FileRef; bytes: Buffer };
let large: { ref: FileRef; bytes: Buffer };
let png: FileRef;

const compressible = (size: number) => {
  const bytes = Buffer.alloc(size);
  for (let i = 0; i < size; i++) bytes[i] = (i % 97) + (i % 13 === 0 ? 40 : 0);
  return bytes;
};

beforeAll(async () => {
  server = await startTestServer();
  small = { bytes: compressible(200_000), ref: null! };
  small.ref = await putContentFile(server.dataDir, small.bytes, 'glb');
  large = { bytes: compressible(1_500_000), ref: null! };
  large.ref = await putContentFile(server.dataDir, large.bytes, 'glb');
  png = await putContentFile(server.dataDir, compressible(50_000), 'png');
});
afterAll(async () => {
  await server.close();
});

const urlOf = (ref: FileRef) => `/files/${ref.sha256}.${ref.ext}`;
const get = (ref: FileRef, headers: Record<string, string> = {}, method = 'GET'): Promise<RawResponse> =>
  nodeRequest(server.port, { path: urlOf(ref), method, headers });

describe('precompressed siblings', () => {
  it('are written by the bake store for GLB and JSON when they save bytes, never for images', async () => {
    for (const suffix of ['br', 'gz']) {
      expect(existsSync(`${filePath(server.dataDir, small.ref)}.${suffix}`)).toBe(true);
      expect(existsSync(`${filePath(server.dataDir, png)}.${suffix}`)).toBe(false);
    }
    // Random bytes do not compress: no sibling.
    const incompressible = await putContentFile(server.dataDir, randomBytes(4096), 'glb');
    expect(existsSync(`${filePath(server.dataDir, incompressible)}.br`)).toBe(false);
    expect(existsSync(`${filePath(server.dataDir, incompressible)}.gz`)).toBe(false);
  });

  it('a sibling name is not a public file name', async () => {
    const res = await nodeRequest(server.port, { path: `${urlOf(small.ref)}.br` });
    expect(res.status).toBe(404);
  });
});

describe.each([
  ['in memory', () => small],
  ['streamed', () => large],
])('negotiation (%s)', (_label, file) => {
  it('br when accepted (and preferred on a tie), gzip when only gzip is, with lengths and Vary', async () => {
    const { ref, bytes } = file();
    const br = await get(ref, { 'Accept-Encoding': 'gzip, deflate, br, zstd' });
    expect(br.status).toBe(200);
    expect(br.headers['content-encoding']).toBe('br');
    expect(br.headers.vary).toMatch(/accept-encoding/i);
    expect(br.headers['content-type']).toBe('model/gltf-binary');
    expect(Number(br.headers['content-length'])).toBe(br.body.length);
    expect(br.body.length).toBeLessThan(bytes.length);
    expect(brotliDecompressSync(br.body).equals(bytes)).toBe(true);
    expect(br.headers.etag).toBe(`"${ref.sha256}.br"`);

    const gz = await get(ref, { 'Accept-Encoding': 'gzip' });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(Number(gz.headers['content-length'])).toBe(gz.body.length);
    expect(gunzipSync(gz.body).equals(bytes)).toBe(true);
    expect(gz.headers.etag).toBe(`"${ref.sha256}.gz"`);

    // The client's weights win over the server's preference.
    const weighted = await get(ref, { 'Accept-Encoding': 'br;q=0.5, gzip;q=1' });
    expect(weighted.headers['content-encoding']).toBe('gzip');
  });

  it('identity without Accept-Encoding, with identity only, or when neither is acceptable', async () => {
    const { ref, bytes } = file();
    for (const accept of [undefined, 'identity', 'deflate', 'br;q=0, gzip;q=0']) {
      const res = await get(ref, accept === undefined ? {} : { 'Accept-Encoding': accept });
      expect(res.status, accept).toBe(200);
      expect(res.headers['content-encoding'], accept).toBeUndefined();
      expect(res.headers.vary).toMatch(/accept-encoding/i);
      expect(res.headers.etag).toBe(`"${ref.sha256}"`);
      expect(res.body.equals(bytes), accept).toBe(true);
    }
  });

  it('a Range request gets the identity bytes, whatever Accept-Encoding says', async () => {
    const { ref, bytes } = file();
    const res = await get(ref, { 'Accept-Encoding': 'br, gzip', Range: 'bytes=100-199' });
    expect(res.status).toBe(206);
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(res.headers['content-range']).toBe(`bytes 100-199/${bytes.length}`);
    expect(res.body.equals(bytes.subarray(100, 200))).toBe(true);
  });

  it('HEAD answers with the headers of the negotiated representation and no body', async () => {
    const { ref } = file();
    const getBr = await get(ref, { 'Accept-Encoding': 'br' });
    const headBr = await get(ref, { 'Accept-Encoding': 'br' }, 'HEAD');
    expect(headBr.status).toBe(200);
    expect(headBr.body.length).toBe(0);
    expect(headBr.headers['content-encoding']).toBe('br');
    expect(headBr.headers['content-length']).toBe(getBr.headers['content-length']);
    expect(headBr.headers.etag).toBe(getBr.headers.etag);
  });

  it('304 per representation: an ETag matches only the representation it names', async () => {
    const { ref } = file();
    const br = `"${ref.sha256}.br"`;
    const notModified = await get(ref, { 'Accept-Encoding': 'br', 'If-None-Match': br });
    expect(notModified.status).toBe(304);
    expect(notModified.headers.etag).toBe(br);
    expect(notModified.headers.vary).toMatch(/accept-encoding/i);
    expect(notModified.body.length).toBe(0);
    // The br ETag does not validate the gzip bytes, nor the identity ETag the br ones.
    expect((await get(ref, { 'Accept-Encoding': 'gzip', 'If-None-Match': br })).status).toBe(200);
    expect((await get(ref, { 'Accept-Encoding': 'br', 'If-None-Match': `"${ref.sha256}"` })).status).toBe(200);
    expect((await get(ref, { 'If-None-Match': `"${ref.sha256}"` })).status).toBe(304);
  });
});

describe('files without siblings', () => {
  it('an image is never encoded and does not vary', async () => {
    const res = await get(png, { 'Accept-Encoding': 'br, gzip' });
    expect(res.status).toBe(200);
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(res.headers.vary ?? '').not.toMatch(/accept-encoding/i);
    expect(res.headers.etag).toBe(`"${png.sha256}"`);
  });
});

describe('Room.model_variants, baked and served', () => {
  it('lists draco (= model_optimized_url), meshopt and plain with the bytes, extensions and texture size of the files served', async () => {
    const content = join(server.dataDir, '..', 'content');
    const b = new RoomBuilder('Hall');
    b.floorAndCeiling('Hall', [0, 0], [8, 8], 4, b.material('Floor'), b.material('Ceiling'));
    b.innerWalls(8, 8, 4, b.material('Wall'));
    await (await import('node:fs/promises')).mkdir(content, { recursive: true });
    await writeFile(join(content, 'hall.glb'), await writeGlb(b.document));
    await writeFile(
      join(content, 'rooms.json'),
      JSON.stringify([{ id: 1, title: 'Hall', slots: 3, token_id: 1, model: 'hall.glb', image: null }]),
    );
    expect((await bakeRooms({ contentDir: content, dataDir: server.dataDir, concurrency: 1 })).failed).toBe(0);
    await server.services.content.reload();

    const { data } = (await (await server.get('/v1/rooms')).json()) as { data: Room[] };
    const room = data[0]!;
    expect(room.model_variants.map((v) => v.name)).toEqual(['draco', 'meshopt', 'plain']);
    expect(room.model_variants[0]!.url).toBe(room.model_optimized_url);
    for (const variant of room.model_variants) {
      const path = new URL(variant.url).pathname;
      const identity = await nodeRequest(server.port, { path });
      expect(identity.body.length, variant.name).toBe(variant.bytes);
      const json = JSON.parse(identity.body.subarray(20, 20 + identity.body.readUInt32LE(12)).toString('utf8')) as {
        extensionsRequired?: string[];
      };
      expect(variant.extensions_required, variant.name).toEqual(json.extensionsRequired ?? []);
      expect(variant.max_texture_size, variant.name).toBeNull(); // untextured hall
      // On the wire: brotli, decoding to the same bytes.
      const br = await nodeRequest(server.port, { path, headers: { 'Accept-Encoding': 'br, gzip' } });
      expect(br.headers['content-encoding'], variant.name).toBe('br');
      expect(brotliDecompressSync(br.body).equals(identity.body), variant.name).toBe(true);
    }
  }, 120_000);
});
