/**
 * Hostile content against the whole bake, as an operator runs it (`museum bake rooms` in its own
 * process, secrets in its environment): models whose resources point at the bake's environment,
 * local files, a metadata endpoint or another host, preview images that redirect inward or are
 * scripted SVGs, titles that drive the terminal. Each such room fails with one clear line (or is
 * published harmlessly), the batch goes on, nothing is fetched from the inside, and no published
 * byte under DATA_DIR holds the secret or the internal answer.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { mkdir, readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { filePath, Manifest } from '../../artifacts/format.ts';
import type { BakeSummary } from '../../bake/pipeline.ts';
import { type CanaryServer, startCanary } from '../fakes/canary.ts';
import { smallRoomGlb, splitGlb } from './fixtures.ts';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const SECRET = `secret-${process.pid}-${Date.now().toString(36)}-do-not-publish`;

let inside: CanaryServer; // stands for 169.254.169.254 / an internal service: never allowed
let outside: CanaryServer; // an outside host the operator allowed (BAKE_ALLOW_HOSTS)
let dir: string;
let glb: Buffer;

/** The small room as a .gltf (JSON + room.bin) with extra images. */
function gltfWith(images: Array<Record<string, string>>, bufferUri = 'room.bin'): { gltf: string; bin: Buffer } {
  const { json, bin } = splitGlb(glb);
  const buffers = json.buffers as Array<{ byteLength: number; uri?: string }>;
  buffers[0]!.uri = bufferUri;
  if (images.length) Object.assign(json, { images, textures: images.map((_, i) => ({ source: i })) });
  return { gltf: JSON.stringify(json), bin: bin! };
}

async function writeRoom(name: string, images: Array<Record<string, string>>, bufferUri?: string): Promise<string> {
  const folder = join(dir, 'content', 'rooms', name);
  await mkdir(folder, { recursive: true });
  const { gltf, bin } = gltfWith(images, bufferUri);
  await writeFile(join(folder, 'room.gltf'), gltf);
  await writeFile(join(folder, 'room.bin'), bin);
  return `rooms/${name}/room.gltf`;
}

const room = (id: number, title: string, model: string, image: string | null = null) => ({
  id,
  title,
  slots: 2,
  token_id: id,
  model,
  image,
});

function bake(env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  const { CONTENT_UPSTREAM_URL: _store, BAKE_ALLOW_HOSTS: _allowed, ...base } = process.env;
  const args = [
    join(ROOT, 'bin/museum.js'),
    'bake',
    'rooms',
    '--content',
    join(dir, 'content'),
    '--out',
    join(dir, 'data'),
    '--concurrency',
    '2',
    '--json',
  ];
  return new Promise((done) => {
    // Async on purpose: the fake servers of this process must keep answering while the bake runs.
    execFile(
      process.execPath,
      args,
      { cwd: ROOT, env: { ...base, ...env }, maxBuffer: 16 << 20, timeout: 240_000 },
      (err, stdout, stderr) => done({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

async function allFiles(root: string): Promise<string[]> {
  const entries = await readdir(root, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'museum-hostile-'));
  glb = Buffer.from(await smallRoomGlb());
  inside = await startCanary((_req, res, canary) =>
    res.writeHead(200, { 'content-type': 'image/png' }).end(`${canary} AccessKeyId=AKIA-INTERNAL`),
  );
  const remote = gltfWith([{ uri: `${inside.url}/latest/meta-data/iam/security-credentials/museum` }]);
  outside = await startCanary((req, res) => {
    if (req.url === '/rooms/remote.gltf') res.writeHead(200).end(remote.gltf);
    else if (req.url === '/rooms/room.bin') res.writeHead(200).end(remote.bin);
    else if (req.url === '/rooms/plain.glb') res.writeHead(200).end(glb);
    else if (req.url === '/previews/moved.png') res.writeHead(302, { location: `${inside.url}/latest/meta-data/` }).end();
    else res.writeHead(404).end();
  });
  const content = join(dir, 'content');
  await mkdir(join(content, 'models'), { recursive: true });
  await writeFile(join(content, 'models', 'small.glb'), glb);
  const scripted =
    `<svg xmlns="http://www.w3.org/2000/svg" width="400" height="300"><script>fetch('/v1/keys')</script><rect ` +
    `width="400" height="300" fill="#3a6"/></svg>`;
  await writeFile(join(content, 'scripted.svg'), scripted);
  await writeFile(
    join(content, 'peeking.svg'),
    `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="10" height="10"><image ` +
      `xlink:href="file:///proc/self/environ" width="10" height="10"/></svg>`,
  );

  const rooms = [
    room(1, 'Good room \u001b]0;pwned\u0007\u001b[2J\u009b31m', 'models/small.glb', 'scripted.svg'),
    room(2, 'Buffer reads the environment', await writeRoom('environ-buffer', [], '../../../../../../../../../proc/self/environ')),
    room(3, 'Absolute image path', await writeRoom('absolute', [{ uri: '/proc/self/environ' }])),
    room(4, 'file: image', await writeRoom('file-uri', [{ uri: 'file:///proc/self/environ' }])),
    room(5, 'Metadata image', await writeRoom('metadata', [{ uri: `${inside.url}/latest/meta-data/iam/security-credentials/museum` }])),
    room(6, 'Symlinked image', await writeRoom('symlink', [{ uri: 'environ.png' }])),
    room(7, 'Text as a texture', await writeRoom('text', [{ uri: 'notes.png', mimeType: 'image/png' }])),
    room(8, 'Remote model, resource on another host', `${outside.url}/rooms/remote.gltf`),
    room(9, 'Preview redirects inward', `${outside.url}/rooms/plain.glb`, `${outside.url}/previews/moved.png`),
    room(10, 'Model on an internal host', `${inside.url}/latest/meta-data/room.glb`),
    room(11, 'SVG preview peeks at a file', 'models/small.glb', 'peeking.svg'),
    room(
      12,
      'KTX2 texture reads the environment',
      await writeRoom('environ-ktx2', [{ uri: '../../../../../../../../../proc/self/environ', mimeType: 'image/ktx2' }]),
    ),
    room(13, 'Text as a KTX2 texture', await writeRoom('text-ktx2', [{ uri: 'notes.ktx2', mimeType: 'image/ktx2' }])),
  ];
  await symlink('/proc/self/environ', join(content, 'rooms', 'symlink', 'environ.png'));
  await writeFile(join(content, 'rooms', 'text', 'notes.png'), `CONTENT_UPSTREAM_TOKEN=${SECRET}\n`);
  await writeFile(join(content, 'rooms', 'text-ktx2', 'notes.ktx2'), `LLM_API_KEY=${SECRET}\n`);
  await writeFile(join(content, 'rooms.json'), JSON.stringify(rooms));
}, 60_000);

afterAll(async () => {
  await Promise.all([inside?.close(), outside?.close()]);
});

describe('a hostile content directory', () => {
  it('fails each hostile room with one clear line, publishes the rest, fetches nothing inside and publishes no secret', async () => {
    const run = await bake({ CONTENT_UPSTREAM_TOKEN: SECRET, LLM_API_KEY: SECRET, BAKE_ALLOW_HOSTS: `127.0.0.1:${outside.port}` });
    expect(run.code, run.stderr).toBe(1); // some rooms failed
    const summary = JSON.parse(run.stdout) as BakeSummary;
    const outcome = (id: number) => summary.rooms.find((r) => r.id === id)!;
    expect(summary).toMatchObject({ published: true, baked: 1, failed: 12 });
    expect(outcome(1).status).toBe('baked');
    const reasons: Record<number, string | RegExp> = {
      2:
        'rooms/environ-buffer/room.gltf: external resource "../../../../../../../../../proc/self/environ" refused: it points outside ' +
        "the model's folder",
      3:
        'rooms/absolute/room.gltf: external resource "/proc/self/environ" refused: a model\'s resources must be relative paths inside ' +
        'its folder',
      4:
        'rooms/file-uri/room.gltf: external resource "file:///proc/self/environ" refused: a model\'s resources must be relative paths ' +
        'inside its folder',
      5:
        `rooms/metadata/room.gltf: external resource "${inside.url}/latest/meta-data/iam/security-credentials/museum" refused: a ` +
        `model's resources must be relative paths inside its folder`,
      6: 'rooms/symlink/room.gltf: external resource "environ.png" refused: it links outside the model\'s folder',
      7: 'texture notes.png is not an image: its bytes are no known image format, not png/jpeg/webp/avif/gif (declared image/png)',
      8:
        `${outside.url}/rooms/remote.gltf: resource "${inside.url}/latest/meta-data/iam/security-credentials/museum" refused: a ` +
        `remote model's resources must come from its own origin`,
      9: `${inside.url}/latest/meta-data/ refused: 127.0.0.1:${inside.port} is a loopback address (allow the host with BAKE_ALLOW_HOSTS)`,
      10:
        `${inside.url}/latest/meta-data/room.glb refused: 127.0.0.1:${inside.port} is a loopback address (allow the host with ` +
        `BAKE_ALLOW_HOSTS)`,
      11: 'preview SVG refused: it references something outside itself (href "file:///proc/self/environ")',
      12:
        'rooms/environ-ktx2/room.gltf: external resource "../../../../../../../../../proc/self/environ" refused: it points outside ' +
        "the model's folder",
      13: 'texture notes.ktx2 is not an image: its bytes are no known image format, not ktx2 (declared image/ktx2)',
    };
    for (const [id, reason] of Object.entries(reasons)) {
      expect(outcome(Number(id)).status, `room ${id}`).toBe('failed');
      expect(outcome(Number(id)).reason, `room ${id}`).toBe(reason);
    }
    // Nothing was asked of the inside, not even once.
    expect(inside.requests).toEqual([]);

    // The scripted SVG preview is published as a PNG raster; no SVG is published at all.
    const manifest = Manifest.parse(JSON.parse(await readFile(join(dir, 'data', 'manifest.json'), 'utf8')));
    const good = manifest.rooms.find((r) => r.id === 1)!;
    expect(good.image!.ext).toBe('png');
    const meta = await sharp(await readFile(filePath(join(dir, 'data'), good.image!))).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['png', 2048, 1536]);
    const files = await allFiles(join(dir, 'data'));
    expect(files.filter((f) => f.endsWith('.svg'))).toEqual([]);

    // Every byte under DATA_DIR (files, manifest, report, caches) and everything printed.
    const needles = [SECRET, inside.canary, 'AccessKeyId'];
    for (const file of files) {
      const bytes = await readFile(file);
      for (const needle of needles) expect(bytes.includes(needle), `${needle} in ${file}`).toBe(false);
    }
    for (const needle of needles) expect(run.stdout + run.stderr).not.toContain(needle);

    // Progress lines for people show the title's control characters escaped, never raw.
    expect(run.stderr).not.toMatch(/[\u001b\u0007\u009b]/);
    expect(run.stderr).toContain('room 1 Good room \\x1b]0;pwned\\x07\\x1b[2J\\x9b31m');
  }, 240_000);
});
