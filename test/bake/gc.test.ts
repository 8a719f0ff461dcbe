/**
 * `museum bake gc`: files none of the last K manifests references and older than the grace period
 * go; everything a kept manifest, a manifest replaced within the grace period, or a young file
 * needs stays. A server mid-request keeps its file; a kill during gc loses nothing referenced.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, constants, existsSync, mkdtempSync, openSync, readdirSync, readSync, utimesSync } from 'node:fs';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { artifactPaths, fileName, filePath, type FileRef, type Manifest, MANIFEST_FORMAT } from '../../artifacts/format.ts';
import { lockDataDir, publishManifest, putContentFile, sha256 } from '../../artifacts/store.ts';
import { collectGarbage, GcError, parseDuration } from '../../bake/gc.ts';
import { bakeRooms } from '../../bake/pipeline.ts';
import { QaFacts, qaFactsDir, writeQaFacts } from '../../bake/qa-facts.ts';
import { writeGlb } from '../../bake/gltf-io.ts';
import { RoomBuilder } from '../../bake/sample/room-builder.ts';
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

const museum = (...args: string[]) =>
  spawnSync(process.execPath, [join(ROOT, 'bin/museum.js'), ...args], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });

/** A QA-facts cache file as the bake writes it, written `ageMs` ago. */
async function writeQaFactsOfAge(dataDir: string, room: number, facts: QaFacts, ageMs: number): Promise<void> {
  await writeQaFacts(dataDir, room, facts);
  const t = (Date.now() - ageMs) / 1000;
  utimesSync(join(qaFactsDir(dataDir), `${room}.json`), t, t);
}

const exists = (dataDir: string, ref: FileRef) =>
  stat(filePath(dataDir, ref)).then(
    () => true,
    () => false,
  );

/** Bytes read from a non-blocking fd into `buffer` (0: nothing written yet). */
function readAvailable(fd: number, buffer: Buffer): number {
  try {
    return readSync(fd, buffer, 0, buffer.length, null);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EAGAIN') return 0;
    throw err;
  }
}

/** Everything a non-blocking fd holds now, as text. */
function readAll(fd: number): string {
  const chunks: Buffer[] = [];
  const buffer = Buffer.alloc(65536);
  for (let n = readAvailable(fd, buffer); n > 0; n = readAvailable(fd, buffer)) chunks.push(Buffer.from(buffer.subarray(0, n)));
  return Buffer.concat(chunks).toString();
}

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

  it('refuses while a bake holds the DATA_DIR lock: a clear error, nothing removed', async () => {
    const data = tmp('museum-gc-locked-');
    const old = await fileOfAge(data, 'old', 6 * HOUR);
    await publishWith(data, 'b1', Date.now() - 5 * HOUR, [old]);
    await publishWith(data, 'b2', Date.now() - 4 * HOUR, []);
    const release = await lockDataDir(data); // this process is the bake
    try {
      const refused = collectGarbage(data, { keep: 1, graceMs: 0 });
      await expect(refused).rejects.toThrow(GcError);
      await expect(refused).rejects.toThrow(`${data} is being baked by pid ${process.pid}`);
      expect(await exists(data, old)).toBe(true);
      expect((await readdir(artifactPaths(data).manifests)).sort()).toEqual(['b1.json', 'b2.json']);
    } finally {
      await release();
    }
    expect((await collectGarbage(data, { keep: 1, graceMs: 0 })).removed.map((f) => f.name)).toEqual([fileName(old)]);
  });

  it(
    'museum bake gc (the CLI as shipped): exit 1 while a bake holds the lock; --dry-run lists what would go and removes nothing; a ' +
      'real run removes exactly those',
    async () => {
      const data = tmp('museum-gc-cli-');
      const kept = await fileOfAge(data, 'kept', 6 * HOUR);
      const old = await fileOfAge(data, 'old', 6 * HOUR);
      const orphan = await fileOfAge(data, 'orphan', 6 * HOUR);
      const young = await fileOfAge(data, 'young', 60_000);
      const picture = await fileOfAge(data, 'plan picture of a room no manifest has', 6 * HOUR);
      await publishWith(data, 'b1', Date.now() - 5 * HOUR, [old]);
      await publishWith(data, 'b2', Date.now() - 4 * HOUR, [kept]);
      await writeQaFactsOfAge(data, 9, { key: 'k9', kind: 'room', planPicture: picture, optimizerWarnings: [] }, 6 * HOUR);
      const everything = () => readdirSync(data, { recursive: true }).map(String).sort();
      const before = everything();

      const release = await lockDataDir(data);
      let locked: ReturnType<typeof museum>;
      try {
        locked = museum('bake', 'gc', '--out', data, '--keep', '1');
      } finally {
        await release();
      }
      expect([locked.status, locked.stdout]).toEqual([1, '']);
      expect(locked.stderr).toBe(
        `museum: ${data} is being baked by pid ${process.pid} on ${hostname()}, since ${locked.stderr.match(/since (\S+);/)?.[1]}; wait ` +
          `for it, or remove ${artifactPaths(data).lock} if that bake is gone\n`,
      );
      expect(everything()).toEqual(before);

      const dry = museum('bake', 'gc', '--out', data, '--keep', '1', '--dry-run');
      expect(dry.status, dry.stderr).toBe(0);
      const wouldGo = dry.stdout.trim().split('\n');
      const summary = wouldGo.pop()!;
      const expected = [...[old, orphan, picture].map((f) => `files/${fileName(f)}`), join('cache', 'qa', '9.json')];
      expect(wouldGo.map((line) => line.match(/^would remove (\S+) \(\d+ B\)$/)?.[1]).sort()).toEqual(expected.sort());
      expect(summary).toBe(
        'gc: would remove 3 files (' +
          (old.bytes + orphan.bytes + picture.bytes) +
          ' B); kept 2 (1 within the grace period) for manifests b2; would prune 1 old manifests; would remove 1 stale QA facts',
      );
      expect(everything()).toEqual(before);

      const run = museum('bake', 'gc', '--out', data, '--keep', '1');
      expect(run.status, run.stderr).toBe(0);
      const went = run.stdout.trim().split('\n').slice(0, -1);
      expect(went).toEqual(wouldGo.map((line) => line.replace(/^would remove /, 'removed ')));
      expect(everything()).toEqual(before.filter((path) => !expected.includes(path) && path !== join('manifests', 'b1.json')));
      for (const ref of [kept, young]) expect(await exists(data, ref)).toBe(true);
    },
  );

  it('parses durations', () => {
    expect([parseDuration('1h'), parseDuration('30m'), parseDuration('90s'), parseDuration('2d'), parseDuration('0')]).toEqual([
      HOUR,
      30 * 60_000,
      90_000,
      48 * HOUR,
      0,
    ]);
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
    const garbage = await Promise.all(Array.from({ length: 3000 }, (_, i) => fileOfAge(data, `garbage ${i}`, 6 * HOUR)));
    await publishWith(data, 'old', Date.now() - 5 * HOUR, garbage.slice(0, 10));
    await publishWith(data, 'current', Date.now() - 4 * HOUR, keep);

    // The CLI lists each removal after making it, at the pace its stdout takes: its stdout is a FIFO
    // this test does not read, so once the FIFO (64 KiB) and Node's buffer (16 KiB) are full, gc waits
    // with some ~900 of its 3000 lines (~90 bytes each) printed. The kill therefore lands mid-run.
    const fifo = join(tmp('museum-gc-fifo-'), 'stdout');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const writer = openSync(fifo, 'w');
    const child = spawn(process.execPath, [join(ROOT, 'bin/museum.js'), 'bake', 'gc', '--out', data, '--keep', '1', '--grace', '0'], {
      cwd: ROOT,
      stdio: ['ignore', writer, 'pipe'],
    });
    closeSync(writer);
    const exited = new Promise<void>((done) => child.on('exit', () => done()));
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk));
    try {
      // Read 200 of its lines (each follows its removal), then kill it: it is at most a full FIFO
      // and buffer ahead of this reader, far from its 3000 removals.
      let listing = '';
      const buffer = Buffer.alloc(4096);
      while (listing.split('\n').length <= 200) {
        const n = readAvailable(reader, buffer);
        if (n > 0) listing += buffer.subarray(0, n).toString();
        else {
          expect(child.exitCode, stderr).toBeNull();
          await sleep(5);
        }
      }
      child.kill('SIGKILL');
      await exited;
      expect(child.signalCode).toBe('SIGKILL');
      const listed = (listing + readAll(reader)).split('\n').filter((line) => line.startsWith('removed '));
      const left = (await Promise.all(garbage.map((ref) => exists(data, ref)))).filter(Boolean).length;
      // Killed mid-run: some of its candidates are gone (at least those it listed), not all.
      expect(listed.length).toBeGreaterThanOrEqual(200);
      expect(garbage.length - left).toBeGreaterThanOrEqual(listed.length);
      expect(left).toBeGreaterThan(0);
      expect(garbage.length - left).toBeLessThanOrEqual(listed.length + 1200); // a full FIFO + buffer ahead at most
      for (const line of listed) expect(await stat(join(data, line.split(' ')[1]!)).catch(() => null), line).toBeNull();
    } finally {
      closeSync(reader);
    }
    for (const ref of keep) {
      const bytes = await readFile(filePath(data, ref));
      expect(sha256(bytes)).toBe(ref.sha256);
    }
    // The next gc takes over the dead gc's lock and removes exactly what is left.
    const before = await readdir(artifactPaths(data).files);
    const next = await collectGarbage(data, { keep: 1, graceMs: 0 });
    expect(next.kept_files).toBe(keep.length);
    expect(next.removed.length).toBe(before.length - keep.length);
    expect((await readdir(artifactPaths(data).files)).sort()).toEqual(keep.map(fileName).sort());
  }, 120_000);

  describe('QA facts (plan pictures) of the bake', () => {
    /** A content source whose rooms are halls of different sizes (so different plan pictures). */
    async function contentWith(content: string, ids: number[]): Promise<void> {
      for (const id of ids) {
        const b = new RoomBuilder(`Hall ${id}`);
        b.floorAndCeiling(`Hall ${id}`, [0, 0], [6 + 2 * id, 8], 4, b.material('Floor'), b.material('Ceiling'));
        b.innerWalls(6 + 2 * id, 8, 4, b.material('Wall'));
        await writeFile(join(content, `hall${id}.glb`), await writeGlb(b.document));
      }
      await writeFile(
        join(content, 'rooms.json'),
        JSON.stringify(ids.map((id) => ({ id, title: `Hall ${id}`, slots: 3, token_id: id, model: `hall${id}.glb`, image: null }))),
      );
    }
    const factsOf = async (data: string, id: number) =>
      QaFacts.parse(JSON.parse(await readFile(join(qaFactsDir(data), `${id}.json`), 'utf8')));
    const factsExist = (data: string, id: number) =>
      stat(join(qaFactsDir(data), `${id}.json`)).then(
        () => true,
        () => false,
      );

    it('a room dropped from the content loses its plan picture and QA facts once out of the last K manifests and out of grace; the ' +
      'others keep theirs', async () => {
      const content = tmp('museum-gc-qa-content-');
      const data = tmp('museum-gc-qa-');
      await contentWith(content, [1, 2]);
      await bakeRooms({ contentDir: content, dataDir: data, concurrency: 1 });
      const [kept, dropped] = [(await factsOf(data, 1)).planPicture!, (await factsOf(data, 2)).planPicture!];
      expect(fileName(kept)).not.toBe(fileName(dropped));
      await contentWith(content, [1]);
      expect((await bakeRooms({ contentDir: content, dataDir: data, concurrency: 1 })).published).toBe(true);

      // Room 2 is still in the previous manifest: kept while that manifest is among the last K ...
      const two = await collectGarbage(data, { keep: 2, graceMs: 0 });
      expect([two.removed, two.removed_qa_facts]).toEqual([[], []]);
      // ... and while it was replaced less than the grace period ago.
      const graced = await collectGarbage(data, { keep: 1 });
      expect(graced.removed_qa_facts).toEqual([]);
      expect(await exists(data, dropped)).toBe(true);

      const later = Date.now() + 2 * HOUR;
      const dry = await collectGarbage(data, { keep: 1, now: later, dryRun: true });
      expect(dry.removed_qa_facts.map((f) => f.name)).toEqual(['2.json']);
      expect(await factsExist(data, 2)).toBe(true);
      const run = await collectGarbage(data, { keep: 1, now: later });
      expect(run.removed.map((f) => f.name)).toContain(fileName(dropped));
      expect(run.removed.map((f) => f.name)).not.toContain(fileName(kept));
      expect(run.removed_qa_facts.map((f) => f.name)).toEqual(['2.json']);
      expect([await exists(data, dropped), await factsExist(data, 2)]).toEqual([false, false]);
      expect([await exists(data, kept), await factsExist(data, 1)]).toEqual([true, true]);
    }, 120_000);

    it('a corrupt or foreign QA-facts file is absent: the bake goes on without it, and it protects nothing', async () => {
      const content = tmp('museum-gc-qa-corrupt-content-');
      const data = tmp('museum-gc-qa-corrupt-');
      await contentWith(content, [1]);
      await bakeRooms({ contentDir: content, dataDir: data, concurrency: 1 });
      const facts = await factsOf(data, 1);
      // The right key, so it would be read for room 1, but not QA facts (optimizerWarnings is no list).
      await writeFile(join(qaFactsDir(data), '1.json'), JSON.stringify({ ...facts, optimizerWarnings: 5 }));
      await writeFile(join(qaFactsDir(data), '7.json'), '{ not json');
      await writeFile(join(qaFactsDir(data), 'notes.txt'), 'not a name the bake writes');
      await writeFile(join(qaFactsDir(data), '9.json.99999999.0a1b2c.tmp'), '{"key":'); // a killed write's temp file
      await writeFile(join(qaFactsDir(data), 'scratch.tmp'), 'not a temp file the bake writes');

      // Room 1 is unchanged, so the report of this bake reads its facts: absent, not a crash.
      await contentWith(content, [1, 2]);
      const second = await bakeRooms({ contentDir: content, dataDir: data, concurrency: 1 });
      expect([second.published, second.failed, second.baked]).toEqual([true, 0, 1]);
      expect(await readFile(artifactPaths(data).report, 'utf8')).toContain('recorded by an earlier bake');

      const run = await collectGarbage(data, { keep: 1, now: Date.now() + 2 * HOUR });
      // The killed write's temp (writer 99999999: above any pid_max, never running) went with the second bake, under its lock.
      expect(existsSync(join(qaFactsDir(data), '9.json.99999999.0a1b2c.tmp'))).toBe(false);
      expect(run.removed_qa_facts.map((f) => f.name)).toEqual(['1.json', '7.json']);
      expect(run.removed.map((f) => f.name)).toContain(fileName(facts.planPicture!)); // named only by the corrupt file
      expect(await exists(data, (await factsOf(data, 2)).planPicture!)).toBe(true);
      expect((await readdir(qaFactsDir(data))).sort()).toEqual(['2.json', 'notes.txt', 'scratch.tmp']);
    }, 120_000);
  });

  it("bake rooms --gc collects after publishing, under the same lock: the replaced bake's files go, the current ones stay", async () => {
    const content = tmp('museum-gc-content-');
    const data = tmp('museum-gc-bake-');
    const writeRoom = async (name: string) => {
      await writeFile(join(content, 'room.glb'), await smallRoomGlb(name));
      await writeFile(
        join(content, 'rooms.json'),
        JSON.stringify([{ id: 1, title: name, slots: 2, token_id: 1, model: 'room.glb', image: null }]),
      );
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
    for (const room of manifest.rooms)
      for (const ref of [room.model!, room.model_optimized!, room.slot_data!]) expect(await exists(data, ref)).toBe(true);
    await expect(stat(artifactPaths(data).lock)).rejects.toThrow();
  }, 120_000);
});

describe('model variants and precompressed siblings', () => {
  /** Every file of a manifest's rooms, with the `.br` / `.gz` siblings that exist beside them. */
  async function roomFiles(data: string, manifest: Manifest): Promise<string[]> {
    const names = manifest.rooms.flatMap((r) => [
      r.model,
      r.model_optimized,
      r.slot_data,
      r.navmesh ?? null,
      ...(r.model_variants ?? []).map((v) => v.file),
    ]);
    const present = new Set(await readdir(artifactPaths(data).files));
    const own = names.filter((ref): ref is FileRef => ref !== null).map(fileName);
    return [...own, ...own.flatMap((n) => [`${n}.br`, `${n}.gz`]).filter((n) => present.has(n))].sort();
  }

  it('keeps the variants and the siblings of kept files; a dropped room’s go with their files', async () => {
    const content = tmp('museum-gc-variants-content-');
    const data = tmp('museum-gc-variants-');
    const hall = async (id: number) => {
      const b = new RoomBuilder(`Hall ${id}`);
      b.floorAndCeiling(`Hall ${id}`, [0, 0], [6 + 2 * id, 8], 4, b.material('Floor'), b.material('Ceiling'));
      b.innerWalls(6 + 2 * id, 8, 4, b.material('Wall'));
      await writeFile(join(content, `hall${id}.glb`), await writeGlb(b.document));
      return { id, title: `Hall ${id}`, slots: 3, token_id: id, model: `hall${id}.glb`, image: null };
    };
    await writeFile(join(content, 'rooms.json'), JSON.stringify([await hall(1), await hall(2)]));
    await bakeRooms({ contentDir: content, dataDir: data, concurrency: 1 });
    const first = JSON.parse(await readFile(artifactPaths(data).manifest, 'utf8')) as Manifest;
    const firstFiles = await roomFiles(data, first);
    expect(first.rooms.every((r) => r.model_variants?.length === 3)).toBe(true);
    expect(firstFiles.filter((n) => n.endsWith('.br')).length).toBeGreaterThanOrEqual(first.rooms.length * 3);

    await writeFile(join(content, 'rooms.json'), JSON.stringify([await hall(1)]));
    await bakeRooms({ contentDir: content, dataDir: data, concurrency: 1 });
    const second = JSON.parse(await readFile(artifactPaths(data).manifest, 'utf8')) as Manifest;
    const kept = await roomFiles(data, second);
    const later = Date.now() + 2 * HOUR;
    const summary = await collectGarbage(data, { keep: 1, now: later });
    const left = new Set(await readdir(artifactPaths(data).files));
    for (const name of kept) expect(left.has(name), name).toBe(true);
    const dropped = firstFiles.filter((n) => !kept.includes(n));
    expect(dropped.some((n) => n.endsWith('.glb.br'))).toBe(true);
    for (const name of dropped) expect(left.has(name), name).toBe(false);
    expect(summary.removed.map((r) => r.name)).toEqual(expect.arrayContaining(dropped));
    // Kept siblings are part of their file, not counted apart.
    expect(summary.kept_files).toBe(kept.filter((n) => !/\.(br|gz)$/.test(n)).length + 1); // + the QA report
  }, 120_000);
});
