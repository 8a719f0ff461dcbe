import { mkdtempSync } from 'node:fs';
import { mkdir, readFile, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sha256 } from '../../artifacts/store.ts';
import { FetchError, SourceResolver } from '../../bake/fetch.ts';
import { startCanary } from '../fakes/canary.ts';
import { allowing, startModelServer, type FakeModelServer } from '../fakes/model-server.ts';

const fast = { timeoutMs: 300, retries: 3, backoffMs: 10 };
let dir: string;
let server: FakeModelServer | undefined;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'museum-fetch-'));
});
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const resolver = (options: Partial<ConstructorParameters<typeof SourceResolver>[0]> = {}) =>
  new SourceResolver({ baseDir: dir, cacheDir: join(dir, 'cache'), fetch: fast, ...(server ? { net: allowing(server) } : {}), ...options });

describe('remote sources', () => {
  it('downloads once into the cache by sha256, then revalidates with a conditional request', async () => {
    const body = Buffer.from('glTF model bytes');
    server = await startModelServer({ '/m.glb': { body } });
    const run1 = resolver();
    const first = await run1.resolveFile(`${server.url}/m.glb`);
    expect(first.sha256).toBe(sha256(body));
    expect(first.path).toBe(join(dir, 'cache', 'blobs', sha256(body)));
    expect(await readFile(first.path)).toEqual(body);
    await run1.save();
    // The next run (a new resolver reading the persisted index) gets a 304 and the same cached file.
    const again = await resolver().resolveFile(`${server.url}/m.glb`);
    expect(again).toEqual(first);
    expect(server.statuses.map((s) => s.status)).toEqual([200, 304]);
  });

  it('retries 5xx with backoff and succeeds', async () => {
    server = await startModelServer({ '/flaky.glb': { body: Buffer.from('ok'), failFirst: 2 } });
    const file = await resolver().resolveFile(`${server.url}/flaky.glb`);
    expect(file.bytes).toBe(2);
    expect(server.statuses.map((s) => s.status)).toEqual([503, 503, 200]);
  });

  it('retries a timeout and succeeds', async () => {
    server = await startModelServer({ '/slow.glb': { body: Buffer.from('slow but fine'), stallFirst: 1, stallMs: 2_000 } });
    const file = await resolver().resolveFile(`${server.url}/slow.glb`);
    expect(file.bytes).toBe(13);
    expect(server.requests.get('/slow.glb')).toBe(2);
  });

  it('gives up after the retries with one clear line', async () => {
    server = await startModelServer({ '/down.glb': { body: Buffer.alloc(1), failFirst: 99 } });
    const error = await resolver()
      .resolveFile(`${server.url}/down.glb`)
      .catch((e: Error) => e);
    expect(error).toBeInstanceOf(FetchError);
    expect((error as Error).message).toBe(`GET ${server.url}/down.glb failed after 4 attempts: 503 Service Unavailable`);
  });

  it('reports a timeout that never recovers', async () => {
    server = await startModelServer({ '/hang.glb': { body: Buffer.alloc(1), stallFirst: 99, stallMs: 5_000 } });
    const error = await resolver({ fetch: { ...fast, retries: 1 } })
      .resolveFile(`${server.url}/hang.glb`)
      .catch((e: Error) => e);
    expect((error as Error).message).toBe(`GET ${server.url}/hang.glb failed after 2 attempts: timed out after 300 ms`);
  });

  it('fails a 4xx at once, without retrying', async () => {
    server = await startModelServer({ '/gone.glb': { body: Buffer.alloc(1), status: 410 } });
    const missing = await resolver()
      .resolveFile(`${server.url}/missing.glb`)
      .catch((e: Error) => e);
    expect((missing as Error).message).toBe(`GET ${server.url}/missing.glb → 404 Not Found`);
    const gone = await resolver()
      .resolveFile(`${server.url}/gone.glb`)
      .catch((e: Error) => e);
    expect((gone as Error).message).toBe(`GET ${server.url}/gone.glb → 410 Gone`);
    expect(server.requests.get('/missing.glb')).toBe(1);
    expect(server.requests.get('/gone.glb')).toBe(1);
  });

  it('enforces the size cap, declared or streamed', async () => {
    server = await startModelServer({
      '/big.glb': { body: Buffer.alloc(5000) },
      '/stream.glb': { body: Buffer.alloc(200_000), chunked: true },
    });
    const r = resolver({ fetch: { ...fast, maxBytes: 4096 } });
    expect(((await r.resolveFile(`${server.url}/big.glb`).catch((e: Error) => e)) as Error).message).toBe(
      `GET ${server.url}/big.glb: 5000 bytes, over the 4096-byte limit`,
    );
    expect(((await r.resolveFile(`${server.url}/stream.glb`).catch((e: Error) => e)) as Error).message).toBe(
      `GET ${server.url}/stream.glb: more than 4096 bytes, over the limit`,
    );
  });

  it('resolves the external files of a remote .gltf relative to its URL', async () => {
    const gltf = Buffer.from(
      JSON.stringify({ asset: { version: '2.0' }, buffers: [{ uri: 'data/scene.bin', byteLength: 4 }], images: [{ uri: 'tex%20a.png' }] }),
    );
    server = await startModelServer({
      '/rooms/a.gltf': { body: gltf },
      '/rooms/data/scene.bin': { body: Buffer.from([1, 2, 3, 4]) },
      '/rooms/tex%20a.png': { body: Buffer.from('png') },
    });
    const model = await resolver().resolveModel(`${server.url}/rooms/a.gltf`);
    expect(Object.keys(model.resources).sort()).toEqual(['data/scene.bin', 'tex%20a.png']);
    expect(model.resources['data/scene.bin']!.sha256).toBe(sha256(Buffer.from([1, 2, 3, 4])));
    // The fingerprint covers the resources: change the .bin, the fingerprint changes.
    server.files.get('/rooms/data/scene.bin')!.body = Buffer.from([9, 9, 9, 9]);
    const changed = await resolver().resolveModel(`${server.url}/rooms/a.gltf`);
    expect(changed.main.sha256).toBe(model.main.sha256);
    expect(changed.fingerprint).not.toBe(model.fingerprint);
  });
});

describe('local sources', () => {
  it('hashes a file once and trusts path + size + mtime afterwards', async () => {
    const path = join(dir, 'room.glb');
    await writeFile(path, 'version one');
    const old = new Date(Date.now() - 60_000);
    await utimes(path, old, old);
    const first = resolver();
    expect((await first.resolveFile('room.glb')).sha256).toBe(sha256('version one'));
    await first.save();

    // Same size and the same mtime: the stat cache answers (it does not read the file).
    await writeFile(path, 'version two');
    await utimes(path, old, old);
    expect((await resolver().resolveFile('room.glb')).sha256).toBe(sha256('version one'));

    // A new mtime: hashed again.
    const newer = new Date(Date.now() - 30_000);
    await utimes(path, newer, newer);
    expect((await resolver().resolveFile('room.glb')).sha256).toBe(sha256('version two'));
  });

  it('does not trust the stat of a file modified right before it was hashed', async () => {
    const path = join(dir, 'fresh.glb');
    await writeFile(path, 'aaaa');
    const first = resolver();
    await first.resolveFile('fresh.glb');
    await first.save();
    const { mtime } = await stat(path);
    await writeFile(path, 'bbbb');
    await utimes(path, mtime, mtime);
    expect((await resolver().resolveFile('fresh.glb')).sha256).toBe(sha256('bbbb'));
  });

  it('covers the external files of a .gltf in the fingerprint', async () => {
    await writeFile(join(dir, 'a.gltf'), JSON.stringify({ asset: { version: '2.0' }, buffers: [{ uri: 'a.bin', byteLength: 2 }] }));
    await writeFile(join(dir, 'a.bin'), Buffer.from([1, 2]));
    const before = await resolver().resolveModel('a.gltf');
    expect(before.resources['a.bin']!.path).toBe(join(dir, 'a.bin'));
    await writeFile(join(dir, 'a.bin'), Buffer.from([3, 4]));
    const after = await resolver().resolveModel('a.gltf');
    expect(after.fingerprint).not.toBe(before.fingerprint);
  });

  it('names a missing file', async () => {
    const error = await resolver()
      .resolveFile('models/nope.glb')
      .catch((e: Error) => e);
    expect(error).toBeInstanceOf(FetchError);
    expect((error as Error).message).toBe('models/nope.glb: file not found');
  });
});

describe('cache bounds', () => {
  it('forgets the least recently used remote files beyond the bound, and their blobs', async () => {
    server = await startModelServer({
      '/a.glb': { body: Buffer.from('aaa') },
      '/b.glb': { body: Buffer.from('bbb') },
      '/c.glb': { body: Buffer.from('ccc') },
    });
    const r = resolver({ maxRemoteEntries: 2 });
    const [a, b, c] = [
      await r.resolveFile(`${server.url}/a.glb`),
      await r.resolveFile(`${server.url}/b.glb`),
      await r.resolveFile(`${server.url}/c.glb`),
    ];
    await r.save();
    const exists = (path: string) =>
      stat(path).then(
        () => true,
        () => false,
      );
    expect([await exists(a.path), await exists(b.path), await exists(c.path)]).toEqual([false, true, true]);
  });
});

describe("a model's resources stay in its own folder or origin", () => {
  const gltfWith = (uri: string) => JSON.stringify({ asset: { version: '2.0' }, buffers: [{ uri, byteLength: 4 }] });

  it('refuses local resources outside the folder: .., absolute paths, file: and other schemes, symlinks out', async () => {
    const room = join(dir, 'content', 'rooms');
    await mkdir(join(room, 'sub'), { recursive: true });
    await writeFile(join(dir, 'content', 'secret.bin'), 'SECRET');
    await writeFile(join(room, 'sub', 'ok.bin'), Buffer.from([1, 2, 3, 4]));
    await symlink(join(dir, 'content', 'secret.bin'), join(room, 'link.bin'));
    const cases: Record<string, string> = {
      '../secret.bin': "it points outside the model's folder",
      '%2e%2e/secret.bin': "it points outside the model's folder",
      'sub/../../secret.bin': "it points outside the model's folder",
      '../../../../../../proc/self/environ': "it points outside the model's folder",
      '/etc/hostname': "a model's resources must be relative paths inside its folder",
      '%2Fetc%2Fhostname': "a model's resources must be relative paths inside its folder",
      'file:///etc/hostname': "a model's resources must be relative paths inside its folder",
      'http://169.254.169.254/latest/meta-data/': "a model's resources must be relative paths inside its folder",
      'link.bin': "it links outside the model's folder",
      '%E0%A4%A': 'malformed percent-encoding',
    };
    for (const [uri, why] of Object.entries(cases)) {
      await writeFile(join(room, 'm.gltf'), gltfWith(uri));
      const error = await resolver()
        .resolveModel('content/rooms/m.gltf')
        .catch((e: Error) => e);
      expect(error, uri).toBeInstanceOf(FetchError);
      expect((error as Error).message, uri).toBe(`content/rooms/m.gltf: external resource "${uri}" refused: ${why}`);
    }
    await writeFile(join(room, 'm.gltf'), gltfWith('sub/ok.bin'));
    expect((await resolver().resolveModel('content/rooms/m.gltf')).resources['sub/ok.bin']!.path).toBe(join(room, 'sub', 'ok.bin'));
  });

  it("refuses a remote model's resource on another host or origin, without fetching it", async () => {
    const other = await startCanary();
    try {
      server = await startModelServer({ '/rooms/a.gltf': { body: Buffer.from(gltfWith(`${other.url}/latest/meta-data/`)) } });
      const error = await resolver({ net: allowing(server, other) })
        .resolveModel(`${server.url}/rooms/a.gltf`)
        .catch((e: Error) => e);
      expect((error as Error).message).toBe(
        `${server.url}/rooms/a.gltf: resource "${other.url}/latest/meta-data/" refused: a remote model's resources must come from its ` +
          `own origin`,
      );
      server.files.set('/rooms/b.gltf', { body: Buffer.from(gltfWith('file:///etc/hostname')) });
      expect(
        (
          (await resolver()
            .resolveModel(`${server.url}/rooms/b.gltf`)
            .catch((e: Error) => e)) as Error
        ).message,
      ).toContain('refused');
      expect(other.requests).toEqual([]);
    } finally {
      await other.close();
    }
  });

  it("refuses a remote model's resource that redirects to another origin, even a trusted one, without fetching there", async () => {
    const other = await startCanary();
    try {
      server = await startModelServer({
        '/rooms/a.gltf': { body: Buffer.from(gltfWith('a.bin')) },
        '/rooms/a.bin': { body: Buffer.alloc(0), redirect: `${other.url}/latest/meta-data/` },
      });
      const trusting = { ...allowing(server, other), trustedOrigins: [new URL(other.url).origin] };
      const error = await resolver({ net: trusting })
        .resolveModel(`${server.url}/rooms/a.gltf`)
        .catch((e: Error) => e);
      expect((error as Error).message).toBe(
        `${server.url}/rooms/a.bin refused: it redirects to another origin (${new URL(other.url).origin})`,
      );
      expect(other.requests).toEqual([]);
      // On its own origin a redirect is followed.
      server.files.set('/rooms/a.bin', { body: Buffer.alloc(0), redirect: '/rooms/moved.bin' });
      server.files.set('/rooms/moved.bin', { body: Buffer.from('bytes') });
      expect((await resolver({ net: allowing(server) }).resolveModel(`${server.url}/rooms/a.gltf`)).resources['a.bin']!.bytes).toBe(5);
    } finally {
      await other.close();
    }
  });

  it('refuses a remote model on a loopback address unless the operator allows the host', async () => {
    server = await startModelServer({ '/m.glb': { body: Buffer.from('glTF') } });
    const error = await resolver({ net: { allowHosts: [], trustedOrigins: [] } })
      .resolveFile(`${server.url}/m.glb`)
      .catch((e: Error) => e);
    expect(error).toBeInstanceOf(FetchError);
    expect((error as Error).message).toBe(
      `${server.url}/m.glb refused: ${new URL(server.url).host} is a loopback address (allow the host with BAKE_ALLOW_HOSTS)`,
    );
    expect(server.requests.size).toBe(0);
  });
});
