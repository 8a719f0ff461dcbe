/**
 * The QA report: one self-contained page per bake — counts against onchain counts, shortfalls,
 * warnings and failures, escaped text, a legend, and pictures that are real images (decoded with
 * sharp) whose pixels show the slot categories in their colours.
 */
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { planSvg, renderQaReport, SLOT_COLOURS, type QaRoom } from '../../bake/report.ts';
import { RoomBuilder } from '../../bake/sample/room-builder.ts';
import { RoomSlotData } from '../../artifacts/format.ts';
import { computeSlots, SLOT_ALGORITHM, type SlotEngineResult } from '../../bake/slots/index.ts';
import { randomRoom } from './rooms/random.ts';
import { gallery, sandwiched } from './rooms/truth.ts';

const SHA = '3'.repeat(64);

/** What the bake hands the report: the published slot data and the QA facts. */
function qa(result: SlotEngineResult, roomId: number): Pick<QaRoom, 'slotData' | 'facts' | 'plan'> {
  const slotData = RoomSlotData.parse({
    version: 1,
    room: roomId,
    model: SHA,
    source_model: SHA,
    models: [SHA],
    generated_at: 'now',
    algorithm: SLOT_ALGORITHM,
    slots: result.slots,
    shortfall: result.shortfall,
    warnings: result.warnings,
  });
  return { slotData, facts: { kind: result.kind, kindEvidence: result.kindEvidence }, plan: result.plan };
}

function closet() {
  const b = new RoomBuilder('Closet');
  const wall = b.material('Wall');
  b.floorAndCeiling('Closet', [0, 0], [2, 2], 2.4, b.material('Floor'), b.material('Ceiling'));
  for (const [name, center, normal] of [
    ['N', [1, 1.2, 0], [0, 0, 1]],
    ['S', [1, 1.2, 2], [0, 0, -1]],
    ['W', [0, 1.2, 1], [1, 0, 0]],
    ['E', [2, 1.2, 1], [-1, 0, 0]],
  ] as const) {
    b.panel(name, { center: [...center], normal: [...normal], up: [0, 1, 0], width: 2, height: 2.4 }, wall);
  }
  return b.document;
}

/** Data URIs of every <img> in the page, in order. */
const images = (html: string) =>
  [...html.matchAll(/<img [^>]*src="data:(image\/[a-z]+);base64,([^"]+)"/g)].map((m) => ({
    mime: m[1]!,
    bytes: Buffer.from(m[2]!, 'base64'),
  }));

/** How many pixels of the image are (nearly) the given #rrggbb colour. */
async function pixelsOf(png: Buffer, hex: string): Promise<number> {
  const { data, info } = await sharp(png).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  let n = 0;
  for (let i = 0; i < data.length; i += info.channels) {
    if (Math.abs(data[i]! - r!) < 8 && Math.abs(data[i + 1]! - g!) < 8 && Math.abs(data[i + 2]! - b!) < 8) n++;
  }
  return n;
}

describe('QA report', () => {
  it('renders rooms, counts, shortfalls, warnings, failures and pictures into one page', async () => {
    const thumbnail = await sharp({ create: { width: 64, height: 36, channels: 3, background: '#336699' } })
      .webp()
      .toBuffer();
    const rooms: QaRoom[] = [
      {
        id: 1,
        title: 'Gallery <script>alert("x")</script> & "Friends"',
        onchainSlots: 8,
        ...qa(computeSlots(gallery().document, { roomId: 1, onchainSlots: 8, modelSha256: SHA }), 1),
        thumbnail,
      },
      {
        id: 2,
        title: 'Sandwich',
        onchainSlots: 2,
        ...qa(computeSlots(sandwiched().document, { roomId: 2, onchainSlots: 2, modelSha256: SHA }), 2),
        warnings: ['optimizer skipped draco'],
      },
      {
        id: 3,
        title: 'Generated hall',
        onchainSlots: 10,
        ...qa(computeSlots(randomRoom(2).document, { roomId: 3, onchainSlots: 10, modelSha256: SHA }), 3),
        changes: { kept: 6, moved: 2, largest_move: 0.031, added: 2, removed: 0, had_previous: true },
      },
      { id: 4, title: 'Closet', onchainSlots: 200, ...qa(computeSlots(closet(), { roomId: 4, onchainSlots: 200, modelSha256: SHA }), 4) },
      { id: 5, title: 'Broken <model>', onchainSlots: 6, error: 'truncated GLB: header declares 100 bytes but the file has 50' },
    ];
    const html = await renderQaReport(rooms, { generatedAt: '2025-05-01T12:00:00Z', bakeId: 'bake-7' });
    // (not toContain: a failure would print the whole page with its images)
    const has = (text: string) => expect(html.includes(text), text).toBe(true);

    // Self-contained and inert: no script, no external resource, every title escaped.
    expect(html.startsWith('<!doctype html>')).toBe(true);
    expect(/<script/i.test(html)).toBe(false);
    expect(/(src|href)="(https?:)?\/\//.test(html)).toBe(false);
    has('Gallery &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &quot;Friends&quot;');
    has('Broken &lt;model&gt;');
    has('bake bake-7 · generated 2025-05-01T12:00:00Z · 5 rooms · 1 with a shortfall · 1 failed');

    // Counts against onchain counts, per room and in the summary.
    has('<span class="ok">8 / 8</span> anchors / onchain slots · room');
    has('<span class="ok">10 / 10</span>');
    const closetPlaced = rooms[3]!.slotData!.slots.length;
    expect(closetPlaced).toBeLessThan(200);
    has(`<span class="short">${closetPlaced} / 200</span>`);
    has(`Shortfall: ${closetPlaced} of 200 placed — only ${closetPlaced} non-overlapping frames`);
    has('<td class="num">– / 6</td>');
    // What the re-bake did to the hung anchors, in the room and in the summary table.
    has('Anchors against the previous bake: 6 kept, 2 moved (largest 0.031 m), 2 added, 0 removed');
    has('<td>6 kept, 2 moved (largest 0.031 m), 2 added, 0 removed</td>');
    has('<strong>Failed:</strong> truncated GLB: header declares 100 bytes but the file has 50');
    has('flipped 4 · ambiguous 0');
    has('flipped 1 · ambiguous 2');

    // Warnings of the engine and of the rest of the bake.
    has('<li>Slot_001: ambiguous (both sides closed): tie-break into the room interior</li>');
    has('<li>optimizer skipped draco</li>');

    // Legend with the four colours.
    for (const colour of Object.values(SLOT_COLOURS)) has(`background:${colour}`);

    // Pictures: 4 plans (the failed room has none) and the thumbnail, all decodable.
    const pictures = images(html);
    expect(pictures.map((p) => p.mime)).toEqual(['image/png', 'image/webp', 'image/png', 'image/png', 'image/png']);
    for (const picture of pictures) {
      const meta = await sharp(picture.bytes).metadata();
      expect(meta.width).toBeGreaterThan(0);
      expect(meta.height).toBeGreaterThan(0);
    }
    expect(pictures[1]!.bytes.equals(thumbnail)).toBe(true);

    // The plans show each category in its colour: gallery authored + flipped, sandwich ambiguous,
    // the generated hall green and nothing authored.
    const galleryPlan = pictures[0]!.bytes;
    const sandwichPlan = pictures[2]!.bytes;
    const hallPlan = pictures[3]!.bytes;
    expect(await pixelsOf(galleryPlan, SLOT_COLOURS.authored)).toBeGreaterThan(50);
    expect(await pixelsOf(galleryPlan, SLOT_COLOURS.flipped)).toBeGreaterThan(50);
    expect(await pixelsOf(galleryPlan, SLOT_COLOURS.ambiguous)).toBe(0);
    expect(await pixelsOf(sandwichPlan, SLOT_COLOURS.ambiguous)).toBeGreaterThan(50);
    expect(await pixelsOf(hallPlan, SLOT_COLOURS.generated)).toBeGreaterThan(50);
    expect(await pixelsOf(hallPlan, SLOT_COLOURS.authored)).toBe(0);
  });

  it('counts the slots without a view, per room, in the summary and in the page, and shows where each view stands', async () => {
    const standing = qa(computeSlots(gallery().document, { roomId: 1, onchainSlots: 8, modelSha256: SHA }), 1);
    const slots = standing.slotData!.slots.map((slot, i) =>
      i === 0 ? { ...slot, view: null } : { ...slot, view: { position: [1, 0, 2 + i] as [number, number, number], distance: 2.25 } },
    );
    const walled = qa(computeSlots(closet(), { roomId: 2, onchainSlots: 2, modelSha256: SHA }), 2);
    const rooms: QaRoom[] = [
      { id: 1, title: 'Gallery', onchainSlots: 8, ...standing, slotData: { ...standing.slotData!, slots } },
      { id: 2, title: 'No floor', onchainSlots: 2, ...walled, warnings: ['navmesh: nothing walkable (no floor under the agent)'] },
    ];
    const html = await renderQaReport(rooms);
    const has = (text: string) => expect(html.includes(text), text).toBe(true);
    const withoutInCloset = walled.slotData!.slots.length;
    has(`${1 + withoutInCloset} slots without a view`);
    has('ambiguous 0 · without a view 1</p>');
    has(`· without a view ${withoutInCloset}</p>`);
    has('<td>none</td>');
    has('<td>2.25 at 1.00, 0.00, 3.00</td>');
    // The summary row of each room: its count in the column before its status.
    expect(html).toMatch(/<td class="num">1<\/td><td class="ok">ok<\/td>/);
    has('<li>navmesh: nothing walkable (no floor under the agent)</li>');
  });

  it('draws one frame and one facing arrow per wall slot, an outline for floor slots', () => {
    const result = computeSlots(gallery().document, { roomId: 1, onchainSlots: 8, modelSha256: SHA });
    const svg = planSvg(result.plan!, result.slots);
    // 7 wall slots: frame line (width 4) + arrow shaft; 1 floor plaque: outline polygon + dot.
    expect(svg.match(/stroke-width="4" stroke-linecap="butt"/g)).toHaveLength(7);
    expect(svg.match(/fill-opacity="0.25"/g)).toHaveLength(1);
    expect(svg.match(/<text [^>]*>\d+<\/text>/g)).toHaveLength(8);
    expect(svg).toContain('1 m · north (−Z) up');
  });

  it('the plan view is drawn on request only (bake room shows no report) and never changes the anchors', () => {
    const withPlan = computeSlots(randomRoom(2).document, { roomId: 3, onchainSlots: 10, modelSha256: SHA });
    const without = computeSlots(randomRoom(2).document, { roomId: 3, onchainSlots: 10, modelSha256: SHA, plan: false });
    expect(withPlan.plan?.segments.length).toBeGreaterThan(0);
    expect(without.plan).toBeUndefined();
    expect(without.slots).toEqual(withPlan.slots);
  });

  it('is the same page for the same input', async () => {
    const result = computeSlots(gallery().document, { roomId: 1, onchainSlots: 8, modelSha256: SHA });
    const rooms: QaRoom[] = [{ id: 1, title: 'Gallery', onchainSlots: 8, ...qa(result, 1) }];
    expect(await renderQaReport(rooms, { generatedAt: 'now' })).toBe(await renderQaReport(rooms, { generatedAt: 'now' }));
  });
});
