import { mkdtempSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadContent } from '../../bake/content.ts';
import { readModelFile } from '../../bake/gltf-io.ts';
import { writeSampleContent } from '../../bake/sample/generate.ts';
import { validate } from './fixtures.ts';

const rotate = (q: number[], v: number[]) => {
  const [x, y, z, w] = q as [number, number, number, number];
  const [vx, vy, vz] = v as [number, number, number];
  const tx = 2 * (y * vz - z * vy);
  const ty = 2 * (z * vx - x * vz);
  const tz = 2 * (x * vy - y * vx);
  return [vx + w * tx + (y * tz - z * ty), vy + w * ty + (z * tx - x * tz), vz + w * tz + (x * ty - y * tx)];
};

let a: string;
let summary: Awaited<ReturnType<typeof writeSampleContent>>;
beforeAll(async () => {
  a = mkdtempSync(join(tmpdir(), 'museum-sample-a-'));
  summary = await writeSampleContent(a);
});

describe('sample content', () => {
  it('is byte-for-byte identical on every run', async () => {
    const b = mkdtempSync(join(tmpdir(), 'museum-sample-b-'));
    const again = await writeSampleContent(b);
    expect(again.files).toEqual(summary.files);
    for (const file of summary.files) {
      expect(Buffer.compare(await readFile(join(a, file)), await readFile(join(b, file))), file).toBe(0);
    }
  });

  it('has seven rooms, each a valid GLB with a 1024×768 preview', async () => {
    const content = await loadContent(a);
    expect(content.rooms).toHaveLength(7);
    for (const room of content.rooms) {
      const glb = await readFile(join(a, room.model));
      expect((await validate(glb)).errors, room.model).toBe(0);
      const meta = await sharp(await readFile(join(a, room.image!))).metadata();
      expect([meta.format, meta.width, meta.height]).toEqual(['png', 1024, 768]);
    }
  });

  it('gallery: authored slots on walls (two facing into the wall), on both sides of a zero-thickness partition, on a pillar', async () => {
    const doc = await readModelFile(join(a, 'models/gallery.glb'));
    const nodes = doc.getRoot().listNodes();
    const slots = nodes.filter((n) => /^Slot_\d{3}$/.test(n.getName()));
    expect(slots).toHaveLength(10);
    expect(slots.every((n) => n.getMesh()!.listPrimitives()[0]!.getMaterial()!.getName() === 'Slot Placeholder')).toBe(true);
    // North wall slots: Slot_001 faces into the room (+Z), Slot_002 was authored facing the wall (-Z).
    const facing = (name: string) => rotate(nodes.find((n) => n.getName() === name)!.getRotation(), [0, 0, 1]);
    expect(facing('Slot_001')[2]).toBeCloseTo(1);
    expect(facing('Slot_002')[2]).toBeCloseTo(-1);
    const partition = nodes
      .find((n) => n.getName() === 'Partition')!
      .getMesh()!
      .listPrimitives()[0]!
      .getAttribute('POSITION')!;
    const xs = new Set(Array.from({ length: partition.getCount() }, (_, i) => partition.getElement(i, [0, 0, 0])[0]));
    expect([...xs]).toEqual([0]);
    expect(nodes.some((n) => n.getName() === 'Pillar')).toBe(true);
    expect(doc.getRoot().listScenes()[0]!.listChildren()[0]!.getRotation()[1]).not.toBe(0);
  });

  it('corridor: slots placed by node transform and baked into vertices', async () => {
    const doc = await readModelFile(join(a, 'models/corridor.glb'));
    const slots = doc
      .getRoot()
      .listNodes()
      .filter((n) => /^Slot_/.test(n.getName()));
    expect(slots).toHaveLength(8);
    const identity = slots.filter((n) => n.getTranslation().every((v) => v === 0));
    expect(identity).toHaveLength(4);
  });

  it('atelier: a PNG base colour and normal map of a few hundred KB', async () => {
    const doc = await readModelFile(join(a, 'models/atelier.glb'));
    const brick = doc
      .getRoot()
      .listMaterials()
      .find((m) => m.getName() === 'Brick')!;
    for (const texture of [brick.getBaseColorTexture()!, brick.getNormalTexture()!]) {
      expect(texture.getMimeType()).toBe('image/png');
      expect(texture.getImage()!.byteLength).toBeGreaterThan(100_000);
    }
  });

  it('sculpture: no placeholders, an onchain count, kind sculpture', async () => {
    const content = await loadContent(a);
    const room = content.rooms.find((r) => r.kind === 'sculpture')!;
    expect(room.slots).toBeGreaterThan(0);
    const doc = await readModelFile(join(a, room.model));
    expect(
      doc
        .getRoot()
        .listNodes()
        .some((n) => /^(Slot|Auto)_/.test(n.getName())),
    ).toBe(false);
    expect(
      doc
        .getRoot()
        .listMaterials()
        .some((m) => m.getName() === 'Slot Placeholder'),
    ).toBe(false);
  });

  it('pictures: most artworks are content files the project drew, each the size and type its record says', async () => {
    const content = await loadContent(a);
    const pictured = content.artworks.filter((w) => !/^[a-z]+:/.test(w.media_info?.url ?? 'none:'));
    expect(pictured.length).toBeGreaterThan(content.artworks.length / 2);
    const formats = new Set<string>();
    for (const work of pictured) {
      const media = work.media_info!;
      const meta = await sharp(await readFile(join(a, media.url))).metadata();
      expect([meta.width, meta.height], media.url).toEqual([media.width, media.height]);
      expect(`image/${meta.format}`, media.url).toBe(media.content_type);
      formats.add(meta.format!);
    }
    expect([...formats].sort()).toEqual(['jpeg', 'png', 'webp']);
    // The sixteen normalization cases keep their outside URLs.
    expect(content.artworks.filter((w) => w.id < 200).every((w) => /^(https|ipfs):\/\//.test(w.media_info!.url))).toBe(true);
  });
});
