/**
 * `make bench-slots`: the slot engine on a ~200k-triangle gallery built here with RoomBuilder
 * (dense walls, floor and ceiling, partitions, furniture, sculptures on plinths).
 *
 * Prints the world-scene build (triangle soup + BVH), the room/sculpture analysis, probe time
 * per authored slot, and generation of 420 anchors (target < 1 s). Each figure is the median of
 * several runs in this process (after one warm-up run).
 */
import { pathToFileURL } from 'node:url';
import { RoomBuilder, type Rect } from '../bake/sample/room-builder.ts';
import { computeSlots } from '../bake/slots/index.ts';
import { extractSlotQuads } from '../bake/slots/extract.ts';
import { generateAnchors } from '../bake/slots/generate.ts';
import { SLOT_ENGINE_DEFAULTS } from '../bake/slots/options.ts';
import { analyseInterior, decideFacings, probeQuad } from '../bake/slots/probe.ts';
import { planFromScene } from '../bake/slots/plan.ts';
import { buildWorldScene } from '../bake/slots/scene.ts';
import { median } from './stats.ts';

const RUNS = 5;
const ANCHORS = 420;
const AUTHORED = 120;

/** 36 × 28 × 6 m gallery; `slots` authored slots along the outer walls. */
export function buildGallery(slots: number): RoomBuilder {
  const b = new RoomBuilder('BenchGallery');
  const wall = b.material('Wall');
  const W = 36;
  const D = 28;
  const H = 6;
  const dense = (len: number, h: number): [number, number] => [Math.round(len * 6), Math.round(h * 6)];
  b.panel('Floor', { center: [W / 2, 0, D / 2], normal: [0, 1, 0], up: [0, 0, -1], width: W, height: D }, b.material('Floor'), [
    W * 3,
    D * 3,
  ]);
  b.panel('Ceiling', { center: [W / 2, H, D / 2], normal: [0, -1, 0], up: [0, 0, 1], width: W, height: D }, b.material('Ceiling'), [
    W * 3,
    D * 3,
  ]);
  b.panel('North', { center: [W / 2, H / 2, 0], normal: [0, 0, 1], up: [0, 1, 0], width: W, height: H }, wall, dense(W, H));
  b.panel('South', { center: [W / 2, H / 2, D], normal: [0, 0, -1], up: [0, 1, 0], width: W, height: H }, wall, dense(W, H));
  b.panel('West', { center: [0, H / 2, D / 2], normal: [1, 0, 0], up: [0, 1, 0], width: D, height: H }, wall, dense(D, H));
  b.panel('East', { center: [W, H / 2, D / 2], normal: [-1, 0, 0], up: [0, 1, 0], width: D, height: H }, wall, dense(D, H));
  // Free-standing partitions, both faces dense, and thick walls with doorways.
  for (const [i, x] of [9, 18, 27].entries()) {
    for (const side of [1, -1] as const) {
      b.panel(
        `Partition${i}_${side}`,
        { center: [x + side * 0.1, 2, D / 2], normal: [side, 0, 0], up: [0, 1, 0], width: 10, height: 4 },
        wall,
        dense(10, 4),
      );
    }
  }
  b.wall('Divider', [4, 7], [32, 7], H, 0.3, wall, [
    { offset: 6, width: 2, sill: 0, height: 2.5 },
    { offset: 18, width: 2, sill: 0, height: 2.5 },
  ]);
  b.wall('Divider2', [4, 21], [32, 21], H, 0.3, wall, [{ offset: 12, width: 3, sill: 0, height: 2.5 }]);
  // Furniture: benches and cabinets against walls, sculptures on plinths.
  const wood = b.material('Wood');
  for (let i = 0; i < 14; i++) b.box(`Bench${i}`, [2 + i * 2.4, 0, 10.5], [3.6 + i * 2.4, 0.45, 11.1], wood);
  for (let i = 0; i < 8; i++) b.box(`Cabinet${i}`, [1 + i * 4.3, 0, 0], [2.2 + i * 4.3, 1.8, 0.5], wood);
  const stone = b.material('Stone');
  for (let i = 0; i < 24; i++) {
    const x = 3 + (i % 8) * 4.2;
    const z = 3.5 + Math.floor(i / 8) * 10.5;
    b.box(`Plinth${i}`, [x - 0.4, 0, z - 0.4], [x + 0.4, 1, z + 0.4], stone);
    b.sphere(`Sculpture${i}`, [x, 1.5, z], 0.5, stone, 64, 32);
  }
  // Authored slots on the outer walls at eye height (some offset, some coplanar).
  const rects: Rect[] = [];
  for (let i = 0; rects.length < slots; i++) {
    const side = i % 4;
    const k = Math.floor(i / 4);
    const along = 2.5 + (k % 12) * 2.6;
    const y = 1.6 + Math.floor(k / 12) * 1.6;
    if (side === 0) rects.push({ center: [along, y, 0.005], normal: [0, 0, 1], up: [0, 1, 0], width: 1.2, height: 0.9 });
    if (side === 1) rects.push({ center: [along, y, D - 0.005], normal: [0, 0, -1], up: [0, 1, 0], width: 1.2, height: 0.9 });
    if (side === 2 && along < D - 1) rects.push({ center: [0, y, along], normal: [1, 0, 0], up: [0, 1, 0], width: 1.0, height: 1.0 });
    if (side === 3 && along < D - 1) rects.push({ center: [W, y, along], normal: [-1, 0, 0], up: [0, 1, 0], width: 1.0, height: 1.0 });
  }
  rects.forEach((r, i) => b.slot(`Slot_${String(i + 1).padStart(3, '0')}`, r, i % 2 ? 'vertices' : 'node'));
  return b;
}

function time<T>(fn: () => T): { ms: number; value: T } {
  const t0 = performance.now();
  const value = fn();
  return { ms: performance.now() - t0, value };
}

/** `fn` run `runs` times (after one warm-up run unless told otherwise): the median time and the last result. */
function measured<T>(fn: () => T, { runs = RUNS, warmUp = true } = {}): { ms: number; value: T } {
  if (warmUp) fn();
  const times: number[] = [];
  let value!: T;
  for (let i = 0; i < runs; i++) {
    const r = time(fn);
    value = r.value;
    times.push(r.ms);
  }
  return { ms: median(times), value };
}

function main(): void {
  const plain = buildGallery(0).document;
  const authored = buildGallery(AUTHORED).document;
  const build = measured(() => buildWorldScene(plain));
  const scene = build.value;
  const { ms: interiorMs, value: interior } = measured(() => analyseInterior(scene));
  const plan = measured(() => planFromScene(scene));
  const authoredScene = buildWorldScene(authored);
  const { quads } = extractSlotQuads(authored);
  const probe = measured(() =>
    decideFacings(
      quads,
      quads.map((q) => probeQuad(authoredScene, q)),
      interior,
    ),
  );
  const decided = { flipped: probe.value.filter((d) => d.sign === -1).length, ambiguous: probe.value.filter((d) => d.ambiguous).length };
  let round = 0;
  const generation = measured(() =>
    generateAnchors(scene, { count: ANCHORS, seed: `bench:${ANCHORS}:${round++}`, interior, tunables: SLOT_ENGINE_DEFAULTS }),
  );
  const placed = generation.value.anchors.length;
  const total = measured(() => computeSlots(plain, { roomId: 1, onchainSlots: ANCHORS, modelSha256: '0'.repeat(64) }), {
    runs: 3,
    warmUp: false,
  });

  const rows: Array<[string, string]> = [
    ['room triangles', String(scene.triangleCount)],
    ['world scene build (soup + BVH)', `${build.ms.toFixed(1)} ms`],
    ['room / sculpture analysis (6,000 rays)', `${interiorMs.toFixed(1)} ms → ${interior.kind}`],
    ['plan view for the QA report', `${plan.ms.toFixed(1)} ms (${plan.value.segments.length / 4} segments)`],
    [
      `probe per authored slot (${quads.length} slots, 90 rays + contact)`,
      `${(probe.ms / quads.length).toFixed(3)} ms (flipped ${decided.flipped}, ambiguous ${decided.ambiguous})`,
    ],
    [
      `generate ${ANCHORS} anchors`,
      `${generation.ms.toFixed(1)} ms (${placed} placed, ${generation.value.examined} spots examined; target < 1000 ms)`,
    ],
    [
      `computeSlots end to end, ${ANCHORS} anchors (median of 3)`,
      `${total.ms.toFixed(1)} ms (${total.value.slots.length} slots; scene, analysis, plan, generation)`,
    ],
  ];
  const width = Math.max(...rows.map((r) => r[0].length));
  console.log(`slot engine benchmark — node ${process.version}, median of ${RUNS} runs`);
  for (const [k, v] of rows) console.log(`  ${k.padEnd(width)}  ${v}`);
  if (generation.ms >= 1000)
    console.log(`  generation missed the 1 s target (a busy machine also does that: compare with the load average)`);
  // Timing depends on the machine; placing all 420 does not.
  if (placed < ANCHORS) process.exitCode = 1;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) main();
