import { spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync } from 'node:fs';
import { readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { artifactPaths, filePath, type FileRef, Manifest, RoomSlotData } from '../../artifacts/format.ts';
import { lockDataDir, readManifest, sha256 } from '../../artifacts/store.ts';
import { readModel } from '../../bake/gltf-io.ts';
import { BakeRunError, bakeRooms, type BakeSummary } from '../../bake/pipeline.ts';
import { writeSampleContent } from '../../bake/sample/generate.ts';
import { allowing, startModelServer } from '../fakes/model-server.ts';
import { angleBetween, rotate } from './rooms/geometry.ts';
import {
  bufferPastEndGlb,
  contentRoom,
  garbageJsonGlb,
  hugeTextureGlb,
  SHARED_ASSETS,
  smallRoomGlb,
  truncatedGlb,
  validate,
  wrongMagicGlb,
} from './fixtures.ts';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const tmp = (prefix: string) => mkdtempSync(join(tmpdir(), prefix));

let sample: string;
beforeAll(async () => {
  sample = tmp('museum-pipeline-content-');
  await writeSampleContent(sample);
});

/** A copy of the sample content, to edit without touching the shared one. */
const copyOfSample = () => {
  const dir = tmp('museum-pipeline-copy-');
  cpSync(sample, dir, { recursive: true });
  return dir;
};

async function editRooms(dir: string, edit: (rooms: Array<Record<string, unknown>>) => void): Promise<void> {
  const rooms = JSON.parse(await readFile(join(dir, 'rooms.json'), 'utf8'));
  edit(rooms);
  await writeFile(join(dir, 'rooms.json'), JSON.stringify(rooms));
}

/** The published state is complete: the manifest parses and every file it names is there, intact. */
async function expectIntact(dataDir: string): Promise<Manifest> {
  const manifest = Manifest.parse(JSON.parse(await readFile(artifactPaths(dataDir).manifest, 'utf8')));
  const refs: FileRef[] = manifest.rooms.flatMap((r) =>
    [r.model, r.model_optimized, r.image, r.thumbnail, r.slot_data].filter((f): f is FileRef => f !== null),
  );
  if (manifest.report) refs.push(manifest.report);
  for (const ref of refs) {
    const bytes = await readFile(filePath(dataDir, ref));
    expect(bytes.byteLength).toBe(ref.bytes);
    expect(sha256(bytes)).toBe(ref.sha256);
  }
  return manifest;
}

const statuses = (summary: BakeSummary) => Object.fromEntries(summary.rooms.map((r) => [r.id, r.status]));

let sampleBake: Promise<{ data: string; summary: BakeSummary }> | undefined;
/** The sample content baked once; a test that starts from a complete bake edits a copy of it. */
const bakedSample = () =>
  (sampleBake ??= (async () => {
    const data = tmp('museum-pipeline-data-');
    return { data, summary: await bakeRooms({ contentDir: sample, dataDir: data, concurrency: 2 }) };
  })());
const copyOfBakedSample = async () => {
  const dir = tmp('museum-pipeline-data-copy-');
  cpSync((await bakedSample()).data, dir, { recursive: true });
  return dir;
};

describe('baking the sample content', () => {
  let data: string;
  let summary: BakeSummary;
  beforeAll(async () => {
    ({ data, summary } = await bakedSample());
  }, 300_000);

  it('bakes every room and publishes a complete manifest', async () => {
    expect(summary.failed).toBe(0);
    expect(summary.baked).toBe(7);
    expect(summary.published).toBe(true);
    const manifest = await expectIntact(data);
    expect(manifest.rooms.map((r) => r.id)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(manifest.collections.map((c) => c.slug)).toContain('founders');
    expect(manifest.artworks).toHaveLength(38); // 16 normalization cases (two in draft collections) and 24 pictures
    // Both collections reach the manifest: the marketplace slug (shown) and the museum collection (filter).
    expect(manifest.artworks.find((a) => a.id === 101)).toMatchObject({
      collection: 'first-season',
      museum_collection: 'founders-portraits',
    });
    expect(manifest.report).toBeTruthy();
    expect(await readFile(artifactPaths(data).report, 'utf8')).toBe(await readFile(filePath(data, manifest.report!), 'utf8'));
  });

  it('stores the .glb source byte for byte as model_url, and slot data naming the files its anchors hold in', async () => {
    const manifest = (await readManifest(data))!;
    for (const room of manifest.rooms) {
      const source = await readFile(
        join(sample, 'models', `${['gallery', 'corridor', 'atelier', 'sculpture', 'great-hall', 'pavilion', 'annex'][room.id - 1]}.glb`),
      );
      expect(room.model!.sha256).toBe(sha256(source));
      const slotData = RoomSlotData.parse(JSON.parse(await readFile(filePath(data, room.slot_data!), 'utf8')));
      // `model` is the file a client loads by default (decisions, "Artifacts"): the optimized model.
      expect(slotData.model).toBe(room.model_optimized!.sha256);
      expect(slotData.source_model).toBe(room.model!.sha256);
      expect(slotData.models).toEqual([room.model!.sha256, ...room.model_variants!.map((v) => v.file.sha256)]);
      expect(room.model_variants!.map((v) => v.name)).toEqual(expect.arrayContaining(['draco', 'meshopt', 'plain']));
      expect(slotData.room).toBe(room.id);
      expect(slotData.slots).toHaveLength(room.slots);
      expect(room.slot_summary!.count).toBe(room.slots);
    }
  });

  it('optimized models are valid, smaller, and carry every slot as a placeholder node with its id', async () => {
    const manifest = (await readManifest(data))!;
    for (const room of manifest.rooms) {
      const glb = await readFile(filePath(data, room.model_optimized!));
      expect(glb.byteLength).toBeLessThanOrEqual(room.model!.bytes);
      expect((await validate(glb)).errors, `room ${room.id}`).toBe(0);
      const slotData = RoomSlotData.parse(JSON.parse(await readFile(filePath(data, room.slot_data!), 'utf8')));
      const nodes = new Map(
        (await readModel(glb))
          .getRoot()
          .listNodes()
          .map((n) => [n.getName(), n]),
      );
      for (const slot of slotData.slots) {
        const node = nodes.get(slot.id);
        const where = `${slot.id} in room ${room.id}`;
        expect(node, where).toBeDefined();
        const primitive = node!.getMesh()!.listPrimitives()[0]!;
        expect(primitive.getMaterial()!.getName()).toBe('Slot Placeholder');
        expect(primitive.getAttribute('TEXCOORD_0'), where).not.toBeNull();
        // The node carries the anchor: world translation = position, rotation = quaternion, no scale.
        const m = node!.getWorldMatrix();
        expect(Math.hypot(m[12] - slot.position[0], m[13] - slot.position[1], m[14] - slot.position[2]), `${where} position`).toBeLessThan(
          1e-3,
        );
        for (const [k, axis] of [
          [0, [1, 0, 0]],
          [1, [0, 1, 0]],
          [2, [0, 0, 1]],
        ] as const) {
          const column = [m[k * 4], m[k * 4 + 1], m[k * 4 + 2]];
          expect(Math.abs(Math.hypot(...column) - 1), `${where} scale`).toBeLessThan(1e-4);
          expect(angleBetween(column, rotate(slot.quaternion, [...axis])), `${where} axis ${k}`).toBeLessThan(0.1);
        }
        expect(angleBetween([m[8], m[9], m[10]], slot.facing), `${where} +Z = facing`).toBeLessThan(0.1);
        // Its mesh: a quad centred on the origin in the node's XY plane, width × height.
        const bounds = [primitive.getAttribute('POSITION')!.getMin([]), primitive.getAttribute('POSITION')!.getMax([])];
        const expected = [
          [-slot.width / 2, -slot.height / 2, 0],
          [slot.width / 2, slot.height / 2, 0],
        ];
        bounds.forEach((b, i) => b.forEach((v, k) => expect(Math.abs(v - expected[i]![k]!), `${where} quad`).toBeLessThan(1e-3)));
      }
      const expectGenerated = room.id === 4 || room.id === 7;
      expect(slotData.slots.every((s) => s.source === (expectGenerated ? 'generated' : 'authored'))).toBe(true);
      expect(slotData.slots.every((s) => s.id.startsWith(expectGenerated ? 'Auto_' : 'Slot_'))).toBe(true);
    }
  });

  it('publishes the preview as is and a 512 px wide WebP thumbnail', async () => {
    const room = (await readManifest(data))!.rooms[0]!;
    expect(await readFile(filePath(data, room.image!))).toEqual(await readFile(join(sample, 'images/gallery.png')));
    const meta = await sharp(await readFile(filePath(data, room.thumbnail!))).metadata();
    expect([meta.format, meta.width]).toEqual(['webp', 512]);
  });

  it('a second run changes nothing and publishes nothing', async () => {
    const before = await readFile(artifactPaths(data).manifest);
    const again = await bakeRooms({ contentDir: sample, dataDir: data, concurrency: 2 });
    expect(again.baked).toBe(0);
    expect(again.skipped).toBe(7);
    expect(again.published).toBe(false);
    expect(await readFile(artifactPaths(data).manifest)).toEqual(before);
  });

  it('is deterministic: one, two and four worker processes write the same files', async () => {
    // The run above bakes at concurrency 2 (two workers, one libvips thread each); 1 is one worker with
    // the machine's threads, 4 four workers.
    for (const concurrency of [1, 4]) {
      const other = tmp(`museum-pipeline-data-c${concurrency}-`);
      await bakeRooms({ contentDir: sample, dataDir: other, concurrency });
      const [a, b] = [(await readManifest(data))!, (await readManifest(other))!];
      for (const [ra, rb] of a.rooms.map((r, i) => [r, b.rooms[i]!] as const)) {
        expect(rb.model_optimized).toEqual(ra.model_optimized);
        expect(rb.thumbnail).toEqual(ra.thumbnail);
        const slots = async (dir: string, ref: FileRef) => {
          const { generated_at: _at, ...rest } = JSON.parse(await readFile(filePath(dir, ref), 'utf8'));
          return rest;
        };
        expect(await slots(other, rb.slot_data!)).toEqual(await slots(data, ra.slot_data!));
      }
    }
  }, 120_000);
});

describe('incremental re-bakes', () => {
  it('rebuilds exactly what changed; metadata alone needs no bake; --force and --only override', async () => {
    const content = copyOfSample();
    const data = await copyOfBakedSample();
    const first = (await readManifest(data))!;

    await editRooms(content, (rooms) => {
      rooms[0]!.title = 'The Longer Gallery';
      rooms[1]!.slots = 7; // onchain count changed
    });
    await writeFile(join(content, 'models/pavilion.glb'), await smallRoomGlb('Pavilion2')); // model changed
    const second = await bakeRooms({ contentDir: content, dataDir: data, concurrency: 2 });
    expect(statuses(second)).toEqual({ 1: 'skipped', 2: 'baked', 3: 'skipped', 4: 'skipped', 5: 'skipped', 6: 'baked', 7: 'skipped' });
    const manifest = await expectIntact(data);
    expect(manifest.rooms[0]!.title).toBe('The Longer Gallery');
    expect(manifest.rooms[0]!.model_optimized).toEqual(first.rooms[0]!.model_optimized);
    expect(manifest.rooms[1]!.slots).toBe(7);

    const only = await bakeRooms({ contentDir: content, dataDir: data, only: [3], force: true });
    expect(statuses(only)).toMatchObject({ 1: 'skipped', 3: 'baked', 5: 'skipped' });
    const forced = await bakeRooms({ contentDir: content, dataDir: data, force: true, concurrency: 2 });
    expect(forced.baked).toBe(7);
  }, 300_000);

  it('rebakes a room whose published files disappeared', async () => {
    const data = tmp('museum-pipeline-missing-');
    await bakeRooms({ contentDir: sample, dataDir: data, only: [7] });
    const room = (await readManifest(data))!.rooms.find((r) => r.id === 7)!;
    await rm(filePath(data, room.thumbnail!));
    const again = await bakeRooms({ contentDir: sample, dataDir: data, only: [7] });
    expect(again.rooms.find((r) => r.id === 7)).toMatchObject({ status: 'baked', reason: 'published files missing' });
    await expectIntact(data);
  }, 120_000);
});

describe('stable anchors through re-bakes', () => {
  it('N → N+4 → N keeps the first N generated anchors, and the summary says what changed', async () => {
    const content = copyOfSample();
    const data = await copyOfBakedSample();
    const annex = 7;
    const { summary: first } = await bakedSample();
    const n = (await readManifest(data))!.rooms.find((r) => r.id === annex)!.slots;
    expect(first.rooms.find((r) => r.id === annex)!.slot_changes).toMatchObject({ added: n, had_previous: false });
    const slotsOf = async () => {
      const entry = (await readManifest(data))!.rooms.find((r) => r.id === annex)!;
      return RoomSlotData.parse(JSON.parse(await readFile(filePath(data, entry.slot_data!), 'utf8'))).slots;
    };
    const before = await slotsOf();

    await editRooms(content, (rooms) => (rooms.find((r) => r.id === annex)!.slots = n + 4));
    const raised = await bakeRooms({ contentDir: content, dataDir: data, concurrency: 1 });
    expect(raised.rooms.find((r) => r.id === annex)).toMatchObject({
      status: 'baked',
      slot_changes: { kept: n, moved: 0, added: 4, removed: 0 },
    });
    expect((await slotsOf()).slice(0, n)).toEqual(before);

    await editRooms(content, (rooms) => (rooms.find((r) => r.id === annex)!.slots = n));
    const lowered = await bakeRooms({ contentDir: content, dataDir: data, concurrency: 1 });
    expect(lowered.rooms.find((r) => r.id === annex)!.slot_changes).toMatchObject({ kept: n, moved: 0, added: 0, removed: 4 });
    expect(await slotsOf()).toEqual(before);
    const report = await readFile(artifactPaths(data).report, 'utf8');
    expect(report).toContain(`Anchors against the previous bake: ${n} kept, 0 moved, 0 added, 4 removed`);
  }, 300_000);
});

describe('bad input fails only its room', () => {
  it('truncated, wrong magic, garbage JSON, buffer past the end, 30000² texture: each fails with its reason, the rest ' +
    'publishes', async () => {
    const content = tmp('museum-pipeline-bad-');
    const good = await smallRoomGlb();
    const bad: Array<[string, Uint8Array, RegExp]> = [
      ['truncated.glb', truncatedGlb(good), /^truncated GLB: header declares \d+ bytes but the file has \d+$/],
      ['magic.glb', wrongMagicGlb(good), /^not a glTF model: wrong magic "gLTX"/],
      ['garbage.glb', garbageJsonGlb(good), /^GLB JSON chunk is not valid JSON/],
      ['past-end.glb', bufferPastEndGlb(good), /^buffer 0 declares \d+ bytes but only \d+ exist \(buffer past the end of the file\)$/],
      [
        'huge-texture.glb',
        await hugeTextureGlb(),
        /^texture Mural_basecolor\.png declares 30000×30000 pixels, over the limit of \d+ pixels$/,
      ],
    ];
    await writeFile(join(content, 'good.glb'), good);
    for (const [name, bytes] of bad) await writeFile(join(content, name), bytes);
    const room = contentRoom;
    await writeFile(
      join(content, 'rooms.json'),
      JSON.stringify([room(1, 'good.glb'), ...bad.map(([name], i) => room(i + 2, name)), room(9, 'missing.glb')]),
    );

    const data = tmp('museum-pipeline-bad-data-');
    const summary = await bakeRooms({ contentDir: content, dataDir: data, concurrency: 2 });
    expect(summary.baked).toBe(1);
    expect(summary.failed).toBe(6);
    bad.forEach(([, , reason], i) => expect(summary.rooms.find((r) => r.id === i + 2)!.reason).toMatch(reason));
    expect(summary.rooms.find((r) => r.id === 9)!.reason).toBe('missing.glb: file not found');
    const manifest = await expectIntact(data);
    expect(manifest.rooms.map((r) => r.id)).toEqual([1]);
  }, 120_000);

  it('a room that fails keeps its previous entry and files', async () => {
    const content = copyOfSample();
    const data = tmp('museum-pipeline-keep-');
    await bakeRooms({ contentDir: content, dataDir: data, only: [1, 2] });
    const before = (await readManifest(data))!.rooms.find((r) => r.id === 1)!;
    await writeFile(join(content, 'models/gallery.glb'), truncatedGlb(await readFile(join(content, 'models/gallery.glb'))));
    const summary = await bakeRooms({ contentDir: content, dataDir: data, only: [1, 2], force: true });
    expect(statuses(summary)).toMatchObject({ 1: 'failed', 2: 'baked' });
    const manifest = await expectIntact(data);
    expect(manifest.rooms.find((r) => r.id === 1)).toEqual(before);
  }, 120_000);
});

describe('sources', () => {
  it('packs a .gltf with external files into the model GLB and keys slots to that file', async () => {
    const gltf = join(SHARED_ASSETS, 'rooms/garage/garage.gltf');
    const content = tmp('museum-pipeline-gltf-');
    await writeFile(
      join(content, 'rooms.json'),
      JSON.stringify([{ id: 1, title: 'Garage', slots: 3, token_id: 1, model: gltf, image: null }]),
    );
    const data = tmp('museum-pipeline-gltf-data-');
    const summary = await bakeRooms({ contentDir: content, dataDir: data });
    expect(summary.baked).toBe(1);
    const manifest = await expectIntact(data);
    const room = manifest.rooms[0]!;
    const packed = await readFile(filePath(data, room.model!));
    expect(packed.subarray(0, 4).toString('latin1')).toBe('glTF');
    expect(room.model!.sha256).not.toBe(sha256(await readFile(gltf)));
    expect((await validate(packed)).errors).toBe(0);
    const slotData = RoomSlotData.parse(JSON.parse(await readFile(filePath(data, room.slot_data!), 'utf8')));
    expect(slotData.source_model).toBe(room.model!.sha256);
    expect(slotData.model).toBe(room.model_optimized!.sha256);
    expect(slotData.slots.map((s) => s.id)).toEqual(['Auto_001', 'Auto_002', 'Auto_003']);
  }, 120_000);

  it('bakes a room whose model and image are http URLs', async () => {
    const server = await startModelServer({
      '/models/small.glb': { body: await smallRoomGlb(), failFirst: 1 },
      '/images/small.png': { body: await readFile(join(sample, 'images/annex.png')) },
    });
    try {
      const content = tmp('museum-pipeline-remote-');
      await writeFile(
        join(content, 'rooms.json'),
        JSON.stringify([
          {
            id: 1,
            title: 'Remote',
            slots: 2,
            token_id: 1,
            model: `${server.url}/models/small.glb`,
            image: `${server.url}/images/small.png`,
          },
        ]),
      );
      const data = tmp('museum-pipeline-remote-data-');
      const summary = await bakeRooms({ contentDir: content, dataDir: data, fetch: { backoffMs: 10 }, net: allowing(server) });
      expect(summary.baked).toBe(1);
      const manifest = await expectIntact(data);
      expect(manifest.rooms[0]!.model!.sha256).toBe(sha256(server.files.get('/models/small.glb')!.body));
    } finally {
      await server.close();
    }
  }, 120_000);
});

describe('one bake at a time per data directory', () => {
  /** The pid of a process that has exited (and so cannot hold anything). */
  const deadPid = () =>
    new Promise<number>((done) => {
      const child = spawn(process.execPath, ['-e', '0']);
      child.on('exit', () => done(child.pid!));
    });

  it('a second bake into the same directory fails with one line naming the first; the first publishes', async () => {
    const data = tmp('museum-pipeline-lock-');
    const runs = await Promise.allSettled([
      bakeRooms({ contentDir: sample, dataDir: data, concurrency: 1 }),
      bakeRooms({ contentDir: sample, dataDir: data, concurrency: 1 }),
    ]);
    const failed = runs.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(runs.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(failed).toHaveLength(1);
    expect(failed[0]!.reason).toBeInstanceOf(BakeRunError);
    expect(String(failed[0]!.reason.message)).toMatch(
      new RegExp(`is being baked by pid ${process.pid} on .*; wait for it, or remove .*bake\\.lock`),
    );
    expect(failed[0]!.reason.message).not.toContain('\n');
    expect((await expectIntact(data)).rooms).toHaveLength(7);
    await expect(stat(artifactPaths(data).lock)).rejects.toThrow(); // released
  }, 120_000);

  it(
    'however contenders interleave, exactly one takes the lock (free or left by a dead bake) and every other names it or ' + 'retries',
    async () => {
      // No half-written lock is ever visible: a loser reads the winner's pid, not "a bake that is starting".
      for (let round = 0; round < 6; round++) {
        const data = tmp('museum-pipeline-race-');
        const dead = round % 2 === 1;
        if (dead)
          await writeFile(
            artifactPaths(data).lock,
            JSON.stringify({ pid: await deadPid(), host: hostname(), started_at: '2026-01-01T00:00:00.000Z' }),
          );
        const runs = await Promise.allSettled(Array.from({ length: 12 }, () => lockDataDir(data)));
        const won = runs.filter((r): r is PromiseFulfilledResult<() => Promise<void>> => r.status === 'fulfilled');
        expect(won).toHaveLength(1);
        for (const lost of runs.filter((r): r is PromiseRejectedResult => r.status === 'rejected')) {
          const named = `is being baked by pid ${process.pid} on ${hostname()}`;
          if (dead)
            expect(lost.reason.message, lost.reason.message).toMatch(new RegExp(`${named}|is being baked by another process; try again`));
          else expect(lost.reason.message).toContain(named);
        }
        await won[0]!.value();
        await expect(stat(artifactPaths(data).lock)).rejects.toThrow();
      }
    },
  );

  it('a lock left by a bake that no longer runs is taken over', async () => {
    const data = tmp('museum-pipeline-stale-');
    await writeFile(
      artifactPaths(data).lock,
      JSON.stringify({ pid: await deadPid(), host: hostname(), started_at: '2026-01-01T00:00:00.000Z' }),
    );
    const summary = await bakeRooms({ contentDir: sample, dataDir: data, only: [4] });
    expect(summary.baked).toBe(1);
    await expect(stat(artifactPaths(data).lock)).rejects.toThrow();
    // Two bakes finding the same dead holder: exactly one takes over.
    await writeFile(
      artifactPaths(data).lock,
      JSON.stringify({ pid: await deadPid(), host: hostname(), started_at: '2026-01-01T00:00:00.000Z' }),
    );
    const runs = await Promise.allSettled([0, 1, 2].map(() => bakeRooms({ contentDir: sample, dataDir: data, only: [4], force: true })));
    expect(runs.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(runs.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason)).toEqual([
      expect.any(BakeRunError),
      expect.any(BakeRunError),
    ]);
    await expect(stat(artifactPaths(data).lock)).rejects.toThrow();
  }, 120_000);

  it("the next bake removes the temp files of bakes killed while taking the lock, never a live taker's", async () => {
    const data = tmp('museum-pipeline-temps-');
    const lock = artifactPaths(data).lock;
    const holder = (pid: number, host = hostname()) => `${JSON.stringify({ pid, host, started_at: '2026-01-01T00:00:00.000Z' })}\n`;
    const dead = await deadPid();
    const killed = `${lock}.${dead}.0badc0de.new`;
    await writeFile(killed, holder(dead));
    const elsewhere = `${lock}.1.0ddba11.new`; // another host's: judged by age alone
    await writeFile(elsewhere, holder(1, 'another-host'));
    const recent = `${lock}.2.5eed.new`;
    await writeFile(recent, holder(2, 'another-host'));
    await utimes(elsewhere, new Date(Date.now() - 3_600_000), new Date(Date.now() - 3_600_000));
    const live = `${lock}.${process.pid}.feedface.new`; // a bake of this process, taking the lock right now
    await writeFile(live, holder(process.pid));
    const release = await lockDataDir(data);
    await release();
    expect((await readdir(data)).sort()).toEqual([basename(recent), basename(live)].sort());
  });

  it('a lock held by a running process (or another host) is respected, and the CLI says so in one line', async () => {
    const data = tmp('museum-pipeline-held-');
    const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)']);
    try {
      await writeFile(
        artifactPaths(data).lock,
        JSON.stringify({ pid: holder.pid, host: hostname(), started_at: '2026-01-01T00:00:00.000Z' }),
      );
      await expect(bakeRooms({ contentDir: sample, dataDir: data })).rejects.toThrow(
        `is being baked by pid ${holder.pid} on ${hostname()}, since 2026-01-01T00:00:00.000Z`,
      );
      const cli = spawnSync(process.execPath, [join(ROOT, 'bin/museum.js'), 'bake', 'rooms', '--content', sample, '--out', data], {
        cwd: ROOT,
        encoding: 'utf8',
      });
      expect(cli.status).toBe(1);
      expect(cli.stderr.trim().split('\n').at(-1)).toMatch(
        /^museum: .* is being baked by pid \d+ on .*; wait for it, or remove .*bake\.lock if that bake is gone$/,
      );
      await writeFile(
        artifactPaths(data).lock,
        JSON.stringify({ pid: await deadPid(), host: 'another-host', started_at: '2026-01-01T00:00:00.000Z' }),
      );
      await expect(bakeRooms({ contentDir: sample, dataDir: data })).rejects.toThrow('on another-host');
      expect(await readManifest(data)).toBeNull(); // nothing was published under someone else's lock
    } finally {
      holder.kill();
    }
  }, 120_000);
});

describe('killing the bake', () => {
  it('SIGKILL mid-run leaves the previously published artifacts intact and readable', async () => {
    const content = copyOfSample();
    const data = tmp('museum-pipeline-kill-');
    await bakeRooms({ contentDir: content, dataDir: data, concurrency: 2 });
    const before = await readFile(artifactPaths(data).manifest);

    const child = spawn(
      process.execPath,
      [join(ROOT, 'bin/museum.js'), 'bake', 'rooms', '--content', content, '--out', data, '--force', '--concurrency', '1'],
      {
        cwd: ROOT,
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    // Kill as soon as the first room is reported: the run is then in the middle of its work.
    await new Promise<void>((resolveKill) => {
      let seen = '';
      child.stderr.on('data', (chunk: Buffer) => {
        seen += chunk.toString();
        if (/baked\s+room/.test(seen)) {
          child.kill('SIGKILL');
          resolveKill();
        }
      });
      child.on('exit', () => resolveKill());
    });
    const exit = await new Promise<NodeJS.Signals | null>((r) =>
      child.exitCode !== null || child.signalCode ? r(child.signalCode) : child.on('exit', (_c, s) => r(s)),
    );
    expect(exit).toBe('SIGKILL');
    expect(await readFile(artifactPaths(data).manifest)).toEqual(before);
    await expectIntact(data);
    // And the next bake picks up from there, taking over the lock the killed bake left behind.
    expect(JSON.parse(await readFile(artifactPaths(data).lock, 'utf8')).pid).toBe(child.pid);
    const after = await bakeRooms({ contentDir: content, dataDir: data, concurrency: 2 });
    expect(after.failed).toBe(0);
    await expectIntact(data);
    await expect(stat(artifactPaths(data).lock)).rejects.toThrow();
  }, 300_000);
});
