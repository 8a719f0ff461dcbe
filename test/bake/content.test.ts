import { mkdtempSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { Collection, Artwork } from '../../artifacts/format.ts';
import { ContentError, loadContent, publicCatalog } from '../../bake/content.ts';
import { writeSampleContent } from '../../bake/sample/generate.ts';

let sample: string;
beforeAll(async () => {
  sample = mkdtempSync(join(tmpdir(), 'museum-content-'));
  await writeSampleContent(sample);
});

async function withEdit(file: string, edit: (items: Array<Record<string, unknown>>) => void): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'museum-content-edit-'));
  for (const name of ['rooms.json', 'collections.json', 'artworks.json']) {
    const items = JSON.parse(await readFile(join(sample, name), 'utf8'));
    if (name === file) edit(items);
    await writeFile(join(dir, name), JSON.stringify(items));
  }
  return dir;
}

describe('loading content', () => {
  it('loads the sample', async () => {
    const content = await loadContent(sample);
    expect(content.rooms.map((r) => r.id)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(content.rooms.find((r) => r.id === 4)?.kind).toBe('sculpture');
    expect(content.collections).toHaveLength(6);
  });

  it.each([
    [
      'rooms.json',
      (items: Array<Record<string, unknown>>) => void (items[2]!.slots = 'six'),
      /rooms\.json: record 2 \(id 3\) field slots: .*expected number/,
    ],
    [
      'rooms.json',
      (items: Array<Record<string, unknown>>) => void (items[0]!.model = 'ftp://x/y.glb'),
      /rooms\.json: record 0 \(id 1\) field model: must be a relative path or an http\(s\) URL$/,
    ],
    ['rooms.json', (items: Array<Record<string, unknown>>) => void (items[1]!.id = 1), /rooms\.json: duplicate room id 1$/],
    [
      'collections.json',
      (items: Array<Record<string, unknown>>) => void (items[1]!.parent = 99),
      /collections\.json: collection 2 has parent 99, which does not exist$/,
    ],
    [
      'collections.json',
      (items: Array<Record<string, unknown>>) => void (items[0]!.status = 'archived'),
      /collections\.json: record 0 \(id 1\) field status: /,
    ],
    [
      'artworks.json',
      (items: Array<Record<string, unknown>>) => void ((items[3]!.media_info as Record<string, unknown>).width = -5),
      /artworks\.json: record 3 \(id 104\) field media_info\.width: /,
    ],
    [
      'artworks.json',
      (items: Array<Record<string, unknown>>) => void (items[1]!.image_url = 'https://cdn.example/old-flat-format.png'),
      /artworks\.json: record 1 \(id 102\): Unrecognized key: "image_url"$/,
    ],
    [
      'artworks.json',
      (items: Array<Record<string, unknown>>) => void (items[0]!.museum_collection = 'nowhere'),
      /artworks\.json: artwork 101 is in museum collection "nowhere", which is not in collections\.json$/,
    ],
  ])('rejects an invalid %s with one line naming the record', async (file, edit, message) => {
    const dir = await withEdit(file, edit);
    const error = await loadContent(dir).catch((e: Error) => e);
    expect(error).toBeInstanceOf(ContentError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain('\n');
  });

  it('says what is missing when the directory is not content', async () => {
    const error = await loadContent(mkdtempSync(join(tmpdir(), 'museum-empty-'))).catch((e: Error) => e);
    expect((error as Error).message).toMatch(/rooms\.json: not found \(is this a content directory\?/);
  });
});

describe('public catalog', () => {
  it('publishes collections whose whole ancestry is published, with parent and child references', async () => {
    const { collections } = publicCatalog(await loadContent(sample), { ipfsGateway: 'https://gw.example' });
    collections.forEach((c) => Collection.parse(c));
    expect(collections.map((c) => c.slug)).toEqual(['founders', 'founders-portraits', 'founders-landscapes', 'generative']);
    const founders = collections.find((c) => c.slug === 'founders')!;
    expect(founders.parent_collection).toBeNull();
    expect(founders.child_collections).toEqual([
      { id: 2, name: 'Founders: Portraits', slug: 'founders-portraits' },
      { id: 3, name: 'Founders: Landscapes', slug: 'founders-landscapes' },
    ]);
    expect(collections.find((c) => c.slug === 'founders-portraits')!.parent_collection).toEqual({
      id: 1,
      name: 'Founders',
      slug: 'founders',
    });
    // The draft child of a published collection is not among its children.
    expect(collections.find((c) => c.slug === 'generative')!.child_collections).toEqual([]);
  });

  it('hides a published child of a draft parent', async () => {
    const dir = await withEdit('collections.json', (items) => void (items.find((c) => c.id === 1)!.status = 'draft'));
    const { collections, artworks } = publicCatalog(await loadContent(dir), { ipfsGateway: 'https://gw.example' });
    expect(collections.map((c) => c.slug)).toEqual(['generative']);
    expect(artworks.every((a) => !a.museum_collection?.startsWith('founders'))).toBe(true);
  });

  it('normalizes artworks and leaves out those of draft collections', async () => {
    const { artworks } = publicCatalog(await loadContent(sample), { ipfsGateway: 'https://gw.example' });
    artworks.forEach((a) => Artwork.parse(a));
    const pictures = Array.from({ length: 24 }, (_, i) => 201 + i); // the sample's own pictures (bake/sample/pictures.ts)
    expect(artworks.map((a) => a.id)).toEqual([101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 115, 116, ...pictures]);
    const byId = new Map(artworks.map((a) => [a.id, a]));
    expect(byId.get(102)!.media?.url).toBe('https://media.museum.example/works/102-display.png');
    expect(byId.get(104)!.media?.url).toBe('https://media.museum.example/originals/104.png');
    expect(byId.get(108)!.media?.url).toMatch(/^https:\/\/gw\.example\/ipfs\/bafy/);
    expect(byId.get(112)!.media).toBeNull();
    // A video blob is never the still: the next blob is; the animation is display_animation_info.
    expect(byId.get(110)!.media).toMatchObject({
      url: 'https://media.museum.example/works/110.gif',
      type: 'image',
      content_type: 'image/gif',
    });
    expect(byId.get(110)!.animation).toMatchObject({ type: 'video', width: 1080, height: 1350 });
    expect(byId.get(115)!.media).toEqual({
      url: 'https://media.museum.example/works/115-poster.jpg',
      type: 'image',
      content_type: 'image/jpeg',
      width: 1000,
      height: 750,
    });
    // Both collections are kept: the marketplace slug is shown, the museum collection filters.
    expect(byId.get(101)).toMatchObject({ collection: 'first-season', museum_collection: 'founders-portraits' });
    expect(byId.get(116)).toMatchObject({ collection: 'loose-drops', museum_collection: null });
  });

  it('orders collections by their sort value, then id', async () => {
    const dir = await withEdit('collections.json', (items) => {
      items.find((c) => c.id === 4)!.sort = 0;
      items.find((c) => c.id === 3)!.sort = null;
    });
    const { collections } = publicCatalog(await loadContent(dir), { ipfsGateway: 'https://gw.example' });
    expect(collections.map((c) => c.slug)).toEqual(['generative', 'founders', 'founders-portraits', 'founders-landscapes']);
    expect(collections.find((c) => c.slug === 'founders')!.child_collections.map((c) => c.slug)).toEqual([
      'founders-portraits',
      'founders-landscapes',
    ]);
  });
});
