/**
 * The immutable artifacts: slot data (`/v1/rooms/{id}/slots`) and files (`/files/<sha256>.<ext>`).
 * Checks the answers themselves (verbatim bodies, types, ETag/304, HEAD, Range, caching, CORS), and that
 * no path outside DATA_DIR/files is reachable.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { artifactPaths, type FileRef } from '../../artifacts/format.ts';
import { putContentFile } from '../../artifacts/store.ts';
import { type FixtureBake, publishFixtureBake } from '../helpers/artifacts.ts';
import { nodeRequest, rawRequest } from '../helpers/raw-http.ts';
import { errorOf, startTestServer, type TestServer } from '../helpers/server.ts';

let server: TestServer;
let fx: FixtureBake;
let big: { ref: FileRef; bytes: Buffer };

beforeAll(async () => {
  server = await startTestServer();
  fx = await publishFixtureBake(server.dataDir);
  // A file above the in-memory threshold (1 MiB), so the streamed path is exercised too.
  const bytes = Buffer.alloc(1_500_000);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7919) % 251;
  big = { ref: await putContentFile(server.dataDir, bytes, 'glb'), bytes };
  await server.services.content.reload();
});
afterAll(async () => {
  await server.close();
});

const fileUrl = (role: string) => `/files/${fx.files[role]!.ref.sha256}.${fx.files[role]!.ref.ext}`;
const bigUrl = () => `/files/${big.ref.sha256}.glb`;

describe('slot data', () => {
  it('serves the baked RoomSlotData verbatim as { data }', async () => {
    for (const room of [1, 2]) {
      const res = await server.get(`/v1/rooms/${room}/slots`, { key: null });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
      const text = await res.text();
      const written = fx.files[`room${room}.slot_data`]!.bytes.toString();
      // Byte for byte: the stored document wrapped in { "data": … }.
      expect(text).toBe(`{"data":${written}}`);
      expect(JSON.parse(text).data).toEqual(fx.slotData.get(room));
    }
    const slots = fx.slotData.get(1)!.slots;
    expect(slots.map((s) => [s.id, s.source, s.flipped])).toEqual([
      ['Slot_001', 'authored', false],
      ['Slot_002', 'authored', true],
      ['Auto_003', 'generated', false],
    ]);
  });

  it('has a strong ETag and answers 304 to If-None-Match (exact, weak form, list, *)', async () => {
    const res = await server.get('/v1/rooms/1/slots', { key: null });
    const etag = res.headers.get('etag')!;
    expect(etag).toMatch(/^"[^"]+"$/);
    expect(res.headers.get('cache-control')).toBe('public, no-cache');
    for (const inm of [etag, `W/${etag}`, `"nope", ${etag}`, '*']) {
      const again = await server.get('/v1/rooms/1/slots', { key: null, headers: { 'If-None-Match': inm } });
      expect(again.status, inm).toBe(304);
      expect(again.headers.get('etag')).toBe(etag);
      expect(await again.text()).toBe('');
    }
    const other = await server.get('/v1/rooms/1/slots', { key: null, headers: { 'If-None-Match': '"something-else"' } });
    expect(other.status).toBe(200);
    // Different rooms, different bodies, different validators.
    expect((await server.get('/v1/rooms/2/slots', { key: null })).headers.get('etag')).not.toBe(etag);
  });

  it('answers 404 for a room without slot data, unknown rooms and non-integer ids', async () => {
    for (const id of [String(fx.rooms.withoutSlots), '999', '0', '-1', 'abc', '1.0', '01']) {
      expect(await errorOf(await server.get(`/v1/rooms/${id}/slots`, { key: null })), id).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    }
  });

  it('answers HEAD, strong and weak If-None-Match, and ignores Range and repeated query parameters', async () => {
    const full = await nodeRequest(server.port, { path: '/v1/rooms/1/slots' });
    const etag = full.headers.etag!;
    const cases: Array<[string, string, Record<string, string>, number]> = [
      ['/v1/rooms/1/slots', 'HEAD', {}, 200],
      ['/v1/rooms/1/slots?x=1&x=2', 'GET', {}, 200],
      ['/v1/rooms/1/slots', 'GET', { 'If-None-Match': etag }, 304],
      ['/v1/rooms/1/slots', 'GET', { 'If-None-Match': `W/${etag}` }, 304],
      ['/v1/rooms/1/slots', 'GET', { 'If-None-Match': '"other"' }, 200],
      ['/v1/rooms/1/slots', 'GET', { Range: 'bytes=0-10' }, 200],
      ['/v1/rooms/3/slots', 'GET', {}, 404],
      ['/v1/rooms/999/slots', 'GET', {}, 404],
    ];
    for (const [path, method, headers, status] of cases) {
      const res = await nodeRequest(server.port, { path, method, headers });
      const what = `${method} ${path} ${JSON.stringify(headers)}`;
      expect(res.status, what).toBe(status);
      if (status === 200) expect(res.headers.etag, what).toBe(etag);
      if (status === 200 && method === 'GET') expect(res.body.equals(full.body), what).toBe(true);
    }
  });
});

describe('files', () => {
  it('serves each kind with its content type, the sha256 as strong ETag, immutable caching and CORS', async () => {
    const expected: Record<string, string> = {
      'room1.model': 'model/gltf-binary',
      'room1.image': 'image/png',
      'room2.image': 'image/jpeg',
      'room1.thumbnail': 'image/webp',
      'room1.slot_data': 'application/json',
    };
    for (const [role, type] of Object.entries(expected)) {
      // (GLB and JSON files are also sent encoded: test/server/files-encoding.test.ts)
      const res = await server.get(fileUrl(role), { key: null, headers: { 'Accept-Encoding': 'identity' } });
      expect(res.status, role).toBe(200);
      expect(res.headers.get('content-type'), role).toBe(type);
      expect(res.headers.get('etag')).toBe(`"${fx.files[role]!.ref.sha256}"`);
      expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      expect(res.headers.get('accept-ranges')).toBe('bytes');
      expect(res.headers.get('content-length')).toBe(String(fx.files[role]!.bytes.length));
      expect(Buffer.from(await res.arrayBuffer()).equals(fx.files[role]!.bytes)).toBe(true);
    }
    const large = await server.get(bigUrl(), { key: null, headers: { 'Accept-Encoding': 'identity' } });
    expect(large.headers.get('content-length')).toBe(String(big.bytes.length));
    expect(Buffer.from(await large.arrayBuffer()).equals(big.bytes)).toBe(true);
  });

  it('answers HEAD with the headers and no body, and 304 to If-None-Match', async () => {
    for (const path of [fileUrl('room1.image'), bigUrl()]) {
      const head = await nodeRequest(server.port, { path, method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(Number(head.headers['content-length'])).toBeGreaterThan(0);
      expect(head.body.length).toBe(0);
      const etag = head.headers.etag!;
      const revalidated = await server.get(path, { key: null, headers: { 'If-None-Match': etag, 'Accept-Encoding': 'identity' } });
      expect(revalidated.status).toBe(304);
      expect(revalidated.headers.get('etag')).toBe(etag);
    }
  });

  it('serves one byte range (206), ignores multiple or invalid ones, and answers 416 when unsatisfiable', async () => {
    for (const [bytes, path] of [
      [fx.files['room1.image']!.bytes, fileUrl('room1.image')],
      [big.bytes, bigUrl()],
    ] as const) {
      const size = bytes.length;
      const cases: Array<[string, number, number]> = [
        ['bytes=0-9', 0, 9],
        ['bytes=100-', 100, size - 1],
        ['bytes=-16', size - 16, size - 1],
        [`bytes=10-${size + 1000}`, 10, size - 1],
        ['bytes=0-0', 0, 0],
      ];
      for (const [range, start, end] of cases) {
        const res = await server.get(path, { key: null, headers: { Range: range } });
        expect(res.status, range).toBe(206);
        expect(res.headers.get('content-range')).toBe(`bytes ${start}-${end}/${size}`);
        expect(res.headers.get('content-length')).toBe(String(end - start + 1));
        expect(Buffer.from(await res.arrayBuffer()).equals(bytes.subarray(start, end + 1)), range).toBe(true);
      }
      for (const range of ['bytes=0-1,5-6', 'bytes=9-3', 'items=0-5', 'bytes=abc']) {
        const res = await server.get(path, { key: null, headers: { Range: range } });
        expect(res.status, range).toBe(200);
        expect(Number(res.headers.get('content-length'))).toBe(size);
        await res.arrayBuffer();
      }
      const stale = await server.get(path, { key: null, headers: { Range: 'bytes=0-9', 'If-Range': '"an-older-version"' } });
      expect(stale.status).toBe(200);
      await stale.arrayBuffer();
      for (const range of [`bytes=${size}-`, 'bytes=-0', `bytes=${size * 10}-${size * 20}`]) {
        const res = await server.get(path, { key: null, headers: { Range: range } });
        expect(res.headers.get('content-range'), range).toBe(`bytes */${size}`);
        expect(await errorOf(res)).toMatchObject({ status: 416, code: 'RANGE_NOT_SATISFIABLE' });
      }
    }
  });

  it('answers 404 for names that are well formed but absent or of an unknown type', async () => {
    for (const name of [
      `${'0'.repeat(64)}.png`,
      `${fx.files['room1.image']!.ref.sha256}.exe`,
      `${fx.files['room1.image']!.ref.sha256}.jpg`,
    ]) {
      expect(await errorOf(await server.get(`/files/${name}`, { key: null })), name).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    }
  });

  it('serves an empty file, again from memory', async () => {
    const empty = await putContentFile(server.dataDir, Buffer.alloc(0), 'json');
    for (let i = 0; i < 2; i++) {
      const res = await server.get(`/files/${empty.sha256}.json`, { key: null });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-length')).toBe('0');
      expect(await res.text()).toBe('');
    }
  });

  it('answers Range, If-Range and HEAD on small and streamed files', async () => {
    const image = fileUrl('room1.image');
    const bytes = fx.files['room1.image']!.bytes;
    const etag = `"${fx.files['room1.image']!.ref.sha256}"`;
    const cases: Array<[string, string, Record<string, string>, number, Buffer | null]> = [
      [image, 'HEAD', {}, 200, null],
      [image, 'GET', { 'If-None-Match': etag }, 304, null],
      [image, 'GET', { Range: 'bytes=5-20' }, 206, bytes.subarray(5, 21)],
      [image, 'HEAD', { Range: 'bytes=5-20' }, 206, null],
      [image, 'GET', { Range: 'bytes=-5' }, 206, bytes.subarray(bytes.length - 5)],
      [image, 'GET', { Range: 'bytes=999999999-' }, 416, null],
      [image, 'GET', { Range: 'bytes=0-1,4-5' }, 200, bytes],
      [image, 'GET', { Range: 'bytes=0-3', 'If-Range': etag }, 206, bytes.subarray(0, 4)],
      [image, 'GET', { Range: 'bytes=0-3', 'If-Range': '"x"' }, 200, bytes],
      [bigUrl(), 'GET', {}, 200, big.bytes],
      [bigUrl(), 'GET', { Range: 'bytes=1000000-1000100' }, 206, big.bytes.subarray(1_000_000, 1_000_101)],
      [bigUrl(), 'HEAD', {}, 200, null],
      [`/files/${'0'.repeat(64)}.png`, 'HEAD', {}, 404, null],
      [`/files/${'1'.repeat(64)}.abc`, 'GET', {}, 404, null],
    ];
    for (const [path, method, headers, status, body] of cases) {
      const res = await nodeRequest(server.port, { path, method, headers });
      const what = `${method} ${path} ${JSON.stringify(headers)}`;
      expect(res.status, what).toBe(status);
      if (body) expect(res.body.equals(body), what).toBe(true);
      if (method === 'HEAD') expect(res.body.length, what).toBe(0);
    }
  });
});

describe('every /files response is sandboxed', () => {
  it('carries nosniff and the sandboxing CSP on every status, method and variant', async () => {
    const image = fileUrl('room1.image');
    const etag = `"${fx.files['room1.image']!.ref.sha256}"`;
    const variant = await server.get(`${image}?width=32`, { key: null });
    const variantEtag = variant.headers.get('etag')!;
    await variant.arrayBuffer();
    const cases: Array<[string, string, Record<string, string>, number]> = [
      [image, 'GET', {}, 200],
      [image, 'HEAD', {}, 200],
      [image, 'GET', { 'If-None-Match': etag }, 304],
      [image, 'GET', { Range: 'bytes=0-9' }, 206],
      [image, 'GET', { Range: 'bytes=999999999-' }, 416],
      [bigUrl(), 'GET', { Range: 'bytes=0-9' }, 206],
      [`/files/${'0'.repeat(64)}.png`, 'GET', {}, 404],
      ['/files/..%2fmanifest.json', 'GET', {}, 404],
      ['/files/', 'GET', {}, 404],
      [`${image}?width=32`, 'GET', {}, 200],
      [`${image}?width=32`, 'GET', { 'If-None-Match': variantEtag }, 304],
      [`${image}?width=32`, 'HEAD', {}, 200],
      [`${image}?width=1`, 'GET', {}, 400],
      [`${fileUrl('room1.model')}?width=100`, 'GET', {}, 400],
      [image, 'POST', {}, 405],
      [image, 'OPTIONS', { Origin: 'https://client.example', 'Access-Control-Request-Method': 'GET' }, 204],
    ];
    for (const [path, method, headers, status] of cases) {
      {
        const res = await nodeRequest(server.port, { path, method, headers });
        const what = `${method} ${path} ${JSON.stringify(headers)}`;
        expect(res.status, what).toBe(status);
        expect(res.headers['x-content-type-options'], what).toBe('nosniff');
        expect(res.headers['content-security-policy'], what).toBe("default-src 'none'; img-src data:; style-src 'unsafe-inline'; sandbox");
      }
    }
  });
});

describe('nothing outside DATA_DIR/files is reachable', () => {
  it('rejects traversal attempts, plain and encoded, with a 404/400 envelope and never another file', async () => {
    const manifest = readFileSync(artifactPaths(server.dataDir).manifest);
    const passwd = readFileSync('/etc/passwd');
    const sha = fx.files['room1.slot_data']!.ref.sha256;
    const attempts = [
      '/files/../manifest.json',
      '/files/..%2fmanifest.json',
      '/files/..%2Fmanifest.json',
      '/files/%2e%2e/manifest.json',
      '/files/%2e%2e%2fmanifest.json',
      '/files/%252e%252e%252fmanifest.json',
      '/files/..%5cmanifest.json',
      '/files/..\\manifest.json',
      '/files/....//manifest.json',
      '/files/..;/manifest.json',
      `/files/${sha}.json/../../manifest.json`,
      `/files/${sha}.json%2f..%2f..%2fmanifest.json`,
      '/files/../../../../../../etc/passwd',
      '/files/..%2f..%2f..%2f..%2f..%2f..%2fetc%2fpasswd',
      '/files/%2fetc%2fpasswd',
      '/files//etc/passwd',
      '/files/%00',
      `/files/${sha}.json%00.png`,
      `/files/${sha}.json%00`,
      `/files/${sha.toUpperCase()}.json`,
      `/files/${sha}.JSON`,
      `/files/${sha}`,
      `/files/./${sha}.json`,
      `/files/%2e/${sha}.json`,
      '/files/',
      '/files',
      `/files/${'a'.repeat(4000)}.png`,
      '/%66iles/../manifest.json',
      '/v1/../manifest.json',
      '/manifest.json',
      '/data/manifest.json',
      '/cache/variants',
    ];
    for (const path of attempts) {
      for (const res of [
        await rawRequest(server.port, `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`),
        await nodeRequest(server.port, { path }),
      ]) {
        expect([400, 404], path).toContain(res.status);
        const body = JSON.parse(res.body.toString()) as { errors: Array<{ extensions: { code: string } }> };
        expect(body.errors[0]!.extensions.code, path).toBe(res.status === 404 ? 'NOT_FOUND' : 'BAD_REQUEST');
        expect(res.body.includes(manifest.subarray(0, 40)), path).toBe(false);
        expect(res.body.includes(passwd.subarray(0, 20)), path).toBe(false);
      }
    }
    // A trailing slash still names the same content-addressed file, inside the files directory.
    const slash = await nodeRequest(server.port, { path: `/files/${sha}.json/` });
    expect(slash.status).toBe(200);
    expect(slash.body.equals(fx.files['room1.slot_data']!.bytes)).toBe(true);
  });
});
