/**
 * `museum bake gc`: files none of the last K manifests references and older than the grace period
 * go; everything a kept manifest, a manifest replaced within the grace period, or a young file
 * needs stays. A server mid-request keeps its file; a kill during gc loses nothing referenced.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, utimesSync } from 'node:fs';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { artifactPaths, fileName, filePath, type FileRef, type Manifest, MANIFEST_FORMAT } from '../../artifacts/format.ts';
import { publishManifest, putContentFile, sha256 } from '../../artifacts/store.ts';
import { collectGarbage, GcError, parseDuration } from '../../bake/gc.ts';
import { bakeRooms } from '../../bake/pipeline.ts';
import { smallRoomGlb } from './fixtures.ts';
import { unbakedRoom } from '../helpers/artifacts.ts';
import { startTestServer } from '../helpers/server.ts';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const tmp = (prefix: string) => mkdtempSync(join(tmpdir(), prefix));
const HOUR = 3_600_000;

/** Publish a manifest referencing `files` (one room each), as of `publishedAt`. */
async function publishWith(dataDir: string, bakeId: string, publishedAt: number, files: FileRef[]): Promise<Manifest> {
  const manifest: Manifest = {
    format: MANIFEST_FORMAT,
    bake_id: bakeId,
    published_at: new Date(publishedAt).toISOString(),
    rooms: files.map((f, i) => unbakedRoom(i + 1, f)),
    collections: [],
    artworks: [],
    report: null,
  };
  await publishManifest(dataDir, manifest);
  return manifest;
}

/** A content file written `ageMs` ago. */
async function fileOfAge(dataDir: string, text: string, ageMs: number): Promise<FileRef> {
  const ref = await putContentFile(dataDir, text, 'glb');
  const t = (Date.now() - ageMs) / 1000;
  utimesSync(filePath(dataDir, ref), t, t);
  return ref;
}

const exists = (dataDir: string, ref: FileRef) => stat(filePath(dataDir, ref)).then(() => true, () => false);

describe('museum bake gc', () => {
  it('keeps what the last K manifests reference, removes the rest once out of grace, and prunes the history', async () => {
    const data = tmp('museum-gc-');
    const now = Date.now();
    const [a1, a2, a3, a4, shared] = await Promise.all(['a1', 'a2', 'a3', 'a4', 'shared'].map((t) => fileOfAge(data, t, 6 * HOUR)));
    const orphan = await fileOfAge(data, 'orphan of a failed bake', 6 * HOUR);
    const young = await fileOfAge(data, 'written a minute ago', 60_000);
    await writeFile(join(artifactPaths(data).files, `${'e'.repeat(64)}.glb.123.abc.tmp`), 'killed write');
    utimesSync(join(artifactPaths(data).files, `${'e'.repeat(64)}.glb.123.abc.tmp`), (now - 6 * HOUR) / 1000, (now - 6 * HOUR) / 1000);
    await publishWith(data, 'b1', now - 5 * HOUR, [a1!, shared!]);
    await publishWith(data, 'b2', now - 4 * HOUR, [a2!, shared!]);
    await publishWith(data, 'b3', now - 3 * HOUR, [a3!]);
    await publishWith(data, 'b4', now - 2 * HOUR, [a4!]);

    const dry = await collectGarbage(data, { keep: 3, dryRun: true });
    expect(dry.kept_manifests).toEqual(['b4', 'b3', 'b2']);
    expect(dry.removed.map((f) => f.name).sort()).toEqual([fileName(a1!), fileName(orphan), `${'e'.repeat(64)}.glb.123.abc.tmp`].sort());
    expect(dry.pruned_manifests).toEqual(['b1']);
    for (const ref of [a1!, orphan]) expect(await exists(data, ref)).toBe(true); // a dry run removes nothing

    const run = await collectGarbage(data, { keep: 3 });
    expect(run.removed.map((f) => f.name).sort()).toEqual(dry.removed.map((f) => f.name).sort());
    expect(run.removed_bytes).toBe(run.removed.reduce((s, f) => s + f.bytes, 0));
    for (const ref of [a2!, a3!, a4!, shared!, young]) expect(await exists(data, ref), fileName(ref)).toBe(true);
    for (const ref of [a1!, orphan]) expect(await exists(data, ref), fileName(ref)).toBe(false);
    expect((await readdir(artifactPaths(data).manifests)).sort()).toEqual(['b2.json', 'b3.json', 'b4.json']);
    expect(run.in_grace).toBe(1); // the young file

    // --keep 1: b2's and b3's files go too, but only once they were replaced longer than the grace ago.
    const one = await collectGarbage(data, { keep: 1, graceMs: 150 * 60_000 });
    expect(one.removed.map((f) => f.name).sort()).toEqual([fileName(a2!), fileName(shared!)].sort());
    expect(await exists(data, a3!)).toBe(true); // b3 was replaced by b4 two hours ago: within 2.5 h
    await expect(collectGarbage(data, { keep: 0 })).rejects.toThrow(GcError);
  });

  it('refuses to remove anything when a manifest of the history is unreadable', async () => {
    const data = tmp('museum-gc-corrupt-');
    const old = await fileOfAge(data, 'old', 6 * HOUR);
    await publishWith(data, 'b1', Date.now() - 5 * HOUR, [old]);
    await publishWith(data, 'b2', Date.now() - 4 * HOUR, []);
    await writeFile(join(artifactPaths(data).manifests, 'b0.json'), '{ not json');
    await expect(collectGarbage(data, { keep: 1 })).rejects.toThrow(/unreadable, so nothing is removed/);
    expect(await exists(data, old)).toBe(true);
  });

  it('parses durations', () => {
    expect([parseDuration('1h'), parseDuration('30m'), parseDuration('90s'), parseDuration('2d'), parseDuration('0')]).toEqual([HOUR, 30 * 60_000, 90_000, 48 * HOUR, 0]);
    expect(() => parseDuration('soon')).toThrow(GcError);
  });

  it('a server mid-request keeps its file; within the grace period the previous bake is still served', async () => {
    const data = tmp('museum-gc-server-');
    const big = Buffer.alloc(24 * 1024 * 1024, 7);
    for (let i = 0; i < big.length; i += 4096) big[i] = i % 251;
    const served = await putContentFile(data, big, 'glb');
    const t = (Date.now() - 6 * HOUR) / 1000;
    utimesSync(filePath(data, served), t, t);
    await publishWith(data, 'old', Date.now() - 5 * HOUR, [served]);
    const server = await startTestServer({ dataDir: data });
    try {
      // A new bake replaces it just now: gc within the grace period keeps it, and it is served.
      await publishWith(data, 'new', Date.now(), [await fileOfAge(data, 'new model', 0)]);
      const graced = await collectGarbage(data, { keep: 1 });
      expect(graced.in_grace).toBeGreaterThan(0);
      expect((await server.get(`/files/${fileName(served)}`)).status).toBe(200);

      // A download under way when its file goes (no grace) still completes, byte for byte.
      const res = await server.get(`/files/${fileName(served)}`);
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      const hash = createHash('sha256');
      const first = await reader.read();
      hash.update(first.value!);
      const gone = await collectGarbage(data, { keep: 1, graceMs: 0 });
      expect(gone.removed.map((f) => f.name)).toContain(fileName(served));
      expect(await exists(data, served)).toBe(false);
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) hash.update(chunk.value);
      expect(hash.digest('hex')).toBe(served.sha256);
    } finally {
      await server.close();
    }
  }, 60_000);

  it('a kill during gc loses nothing still referenced, and the next gc takes over and finishes', async () => {
    const data = tmp('museum-gc-kill-');
    const keep = await Promise.all(Array.from({ length: 50 }, (_, i) => fileOfAge(data, `kept ${i}`, 6 * HOUR)));
    const garbage = await Promise.all(Array.from({ length: 4000 }, (_, i) => fileOfAge(data, `garbage ${i}`, 6 * HOUR)));
    await publishWith(data, 'old', Date.now() - 5 * HOUR, garbage.slice(0, 10));
    await publishWith(data, 'current', Date.now() - 4 * HOUR, keep);

    const child = spawn(process.execPath, [join(ROOT, 'bin/museum.js'), 'bake', 'gc', '--out', data, '--keep', '1', '--grace', '0'], { cwd: ROOT, stdio: 'ignore' });
    // Kill once it has visibly started removing.
    const total = keep.length + garbage.length;
    for (let i = 0; i < 2000; i++) {
      const left = (await readdir(artifactPaths(data).files)).length;
      if (left < total - 50 || child.exitCode !== null) break;
      await new Promise((r) => setTimeout(r, 2));
    }
    child.kill('SIGKILL');
    await new Promise((r) => (child.exitCode !== null || child.signalCode ? r(null) : child.on('exit', r)));
    for (const ref of keep) {
      const bytes = await readFile(filePath(data, ref));
      expect(sha256(bytes)).toBe(ref.sha256);
    }
    const next = await collectGarbage(data, { keep: 1, graceMs: 0 });
    expect(next.kept_files).toBe(keep.length);
    expect((await readdir(artifactPaths(data).files)).length).toBe(keep.length);
  }, 120_000);

  it('bake rooms --gc collects after publishing, under the same lock: the replaced bake\'s files go, the current ones stay', async () => {
    const content = tmp('museum-gc-content-');
    const data = tmp('museum-gc-bake-');
    const writeRoom = async (name: string) => {
      await writeFile(join(content, 'room.glb'), await smallRoomGlb(name));
      await writeFile(join(content, 'rooms.json'), JSON.stringify([{ id: 1, title: name, slots: 2, token_id: 1, model: 'room.glb', image: null }]));
    };
    await writeRoom('First');
    await bakeRooms({ contentDir: content, dataDir: data, concurrency: 1 });
    const first = (await readdir(artifactPaths(data).files)).sort();
    await writeRoom('Second');
    const second = await bakeRooms({ contentDir: content, dataDir: data, concurrency: 1, gc: { keep: 1, graceMs: 0 } });
    expect(second.gc).not.toBeNull();
    const removed = second.gc!.removed.map((f) => f.name);
    expect(removed.length).toBeGreaterThan(0);
    expect(removed.every((name) => first.includes(name))).toBe(true);
    const manifest = JSON.parse(await readFile(artifactPaths(data).manifest, 'utf8')) as Manifest;
    for (const room of manifest.rooms) for (const ref of [room.model!, room.model_optimized!, room.slot_data!]) expect(await exists(data, ref)).toBe(true);
    await expect(stat(artifactPaths(data).lock)).rejects.toThrow();
  }, 120_000);
});
