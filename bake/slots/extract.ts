/**
 * Extract: find slot placeholders (Slot_NNN authored, Auto_NNN embedded by an earlier bake) and
 * measure each quad in world space — centre, area-weighted winding normal, in-plane extents.
 * Placement by node TRS and placement baked into the vertices give the same result because only
 * world-space vertices are used.
 */
import type { Document, Node } from '@gltf-transform/core';
import { SLOT_MATERIAL_NAME, slotId } from '../../artifacts/format.ts';
import { appendWorldTriangles, forEachDrawnPrimitive, isSlotPrimitive, SLOT_NAME_PATTERN, TriangleSoup } from './scene.ts';
import { cross, dot, length, normalize, type V3 } from '../../common/vec.ts';
import { levelledFrame } from './orient.ts';
import { BAKE_LIMITS } from '../settings.ts';

/** Numbers above it are renumbered like duplicates: ids stay Slot_NNN, the gap report stays short. */
const MAX_SLOT_NUMBER = BAKE_LIMITS.maxSlotNumber;

export interface SlotQuad {
  id: string;
  index: number;
  source: 'authored' | 'generated';
  /** The placeholder node (embedding gives it the anchor as its transform). */
  node: Node;
  nodeName: string;
  /** Centre of the quad's extents (world). */
  center: V3;
  /** Authored normal: area-weighted winding normal of the quad (unit, world). */
  normal: V3;
  width: number;
  height: number;
}

interface Group {
  node: Node;
  soup: TriangleSoup;
}

interface Measured {
  node: Node;
  nodeName: string;
  parsed: { prefix: 'Slot' | 'Auto'; number: number } | null;
  center: V3;
  normal: V3;
  width: number;
  height: number;
}

/**
 * The numbers missing below the highest of `sorted` (ascending, distinct), compactly: "3-4, 6".
 * Walks the used numbers, never the range up to the highest (which the model chooses).
 */
function gaps(sorted: number[]): string {
  const out: string[] = [];
  let expected = 1;
  for (const n of sorted) {
    if (n > expected) out.push(n - 1 === expected ? String(expected) : `${expected}-${n - 1}`);
    expected = n + 1;
  }
  return out.join(', ');
}

const isFiniteMeasure = (m: Measured): boolean => [...m.center, ...m.normal, m.width, m.height].every(Number.isFinite);

/** Measure a placeholder; null (with the warning) when it has no usable area. */
function measureUsable(group: Group, warnings: string[]): Measured | null {
  const name = group.node.getName();
  const dropped = group.soup.dropped;
  const m = measure(group);
  if (m && isFiniteMeasure(m)) {
    if (dropped) warnings.push(`slot node "${name}": ${dropped} triangle(s) with non-finite vertex positions were ignored`);
    return m;
  }
  const why = dropped
    ? `${dropped} triangle(s) with non-finite vertex positions`
    : m
      ? 'its extents are not finite'
      : group.soup.count
        ? 'degenerate triangles'
        : 'no triangles';
  warnings.push(`slot node "${name}" has no area (${why}); it was ignored`);
  return null;
}

function measure(group: Group): Measured | null {
  const p = group.soup.positions;
  const triangles = p.length / 9;
  let sum: V3 = [0, 0, 0];
  let total = 0;
  let largest: V3 = [0, 0, 0];
  let largestArea = 0;
  for (let t = 0; t < triangles; t++) {
    const o = t * 9;
    const a: V3 = [p[o + 3]! - p[o]!, p[o + 4]! - p[o + 1]!, p[o + 5]! - p[o + 2]!];
    const b: V3 = [p[o + 6]! - p[o]!, p[o + 7]! - p[o + 1]!, p[o + 8]! - p[o + 2]!];
    const c = cross(a, b);
    const area = length(c);
    sum = [sum[0] + c[0], sum[1] + c[1], sum[2] + c[2]];
    total += area;
    if (area > largestArea) {
      largestArea = area;
      largest = c;
    }
  }
  if (total <= 1e-12) return null;
  // A placeholder drawn double-faced (or as a flat box) cancels out; its largest face still
  // tells the plane, and the probes decide the side.
  const normal = normalize(length(sum) >= 0.5 * total ? sum : largest);
  const frame = levelledFrame(normal);
  const lo: V3 = [Infinity, Infinity, Infinity];
  const hi: V3 = [-Infinity, -Infinity, -Infinity];
  for (let i = 0; i < p.length; i += 3) {
    const v: V3 = [p[i]!, p[i + 1]!, p[i + 2]!];
    const c: V3 = [dot(v, frame.x), dot(v, frame.y), dot(v, frame.z)];
    for (let k = 0; k < 3; k++) {
      lo[k] = Math.min(lo[k]!, c[k]!);
      hi[k] = Math.max(hi[k]!, c[k]!);
    }
  }
  const mid = (k: number) => (lo[k]! + hi[k]!) / 2;
  const center: V3 = [0, 1, 2].map((k) => mid(0) * frame.x[k]! + mid(1) * frame.y[k]! + mid(2) * frame.z[k]!) as V3;
  const match = SLOT_NAME_PATTERN.exec(group.node.getName().trim());
  return {
    node: group.node,
    nodeName: group.node.getName(),
    parsed: match ? { prefix: match[1]!.toLowerCase() === 'auto' ? 'Auto' : 'Slot', number: Number(match[2]) } : null,
    center,
    normal,
    width: hi[0] - lo[0],
    height: hi[1] - lo[1],
  };
}

const byPosition = (a: Measured, b: Measured) => a.center[0] - b.center[0] || a.center[1] - b.center[1] || a.center[2] - b.center[2];

/**
 * Every slot placeholder of the scene, with ids assigned: `Slot_7` and `slot_007` are Slot_007.
 * Duplicates keep the id for the first (by node name, then position) and are renumbered after
 * the highest number; numbers above MAX_SLOT_NUMBER and placeholders found only by material are
 * numbered the same way; gaps are reported. All of it is stated in `warnings`.
 */
export function extractSlotQuads(document: Document): { quads: SlotQuad[]; warnings: string[] } {
  const groups = new Map<Node, Group>();
  forEachDrawnPrimitive(document, (node, primitive, matrix) => {
    const named = SLOT_NAME_PATTERN.test(node.getName().trim());
    if (!named && !isSlotPrimitive(primitive)) return;
    let group = groups.get(node);
    if (!group) groups.set(node, (group = { node, soup: new TriangleSoup() }));
    appendWorldTriangles(primitive, matrix, group.soup);
  });

  const warnings: string[] = [];
  const measured: Measured[] = [];
  for (const group of groups.values()) {
    const m = measureUsable(group, warnings);
    if (m) measured.push(m);
  }

  const quads: SlotQuad[] = [];
  for (const prefix of ['Slot', 'Auto'] as const) {
    const named = measured
      .filter((m) => m.parsed?.prefix === prefix)
      .sort(
        (a, b) =>
          a.parsed!.number - b.parsed!.number || (a.nodeName < b.nodeName ? -1 : a.nodeName > b.nodeName ? 1 : 0) || byPosition(a, b),
      );
    const unnamed =
      prefix === 'Slot'
        ? measured
            .filter((m) => !m.parsed)
            .sort((a, b) => (a.nodeName < b.nodeName ? -1 : a.nodeName > b.nodeName ? 1 : 0) || byPosition(a, b))
        : [];
    const used = new Set<number>();
    const pending: Array<{ m: Measured; why: string }> = [];
    for (const m of named) {
      const n = m.parsed!.number;
      if (n < 1) pending.push({ m, why: `"${m.nodeName}" is not a 1-based number` });
      else if (n > MAX_SLOT_NUMBER) pending.push({ m, why: `"${m.nodeName}" is above the highest slot number, ${MAX_SLOT_NUMBER}` });
      else if (used.has(n)) pending.push({ m, why: `duplicate id ${slotId(prefix, n)} (node "${m.nodeName}")` });
      else {
        used.add(n);
        quads.push(toQuad(m, prefix, n));
      }
    }
    const sorted = [...used].sort((a, b) => a - b);
    const missing = gaps(sorted);
    if (missing) warnings.push(`${prefix}_NNN numbering has gaps: ${missing} missing`);
    for (const m of unnamed)
      pending.push({ m, why: `node "${m.nodeName}" uses the ${SLOT_MATERIAL_NAME} material but is not named Slot_NNN` });
    let next = sorted.at(-1) ?? 0;
    for (const { m, why } of pending) {
      next++;
      quads.push(toQuad(m, prefix, next));
      warnings.push(`${why}; numbered ${slotId(prefix, next)}`);
    }
  }
  if (quads.some((q) => q.source === 'authored') && quads.some((q) => q.source === 'generated')) {
    warnings.push('model has both authored Slot_NNN and generated Auto_NNN placeholders');
  }
  quads.sort((a, b) => (a.source === b.source ? a.index - b.index : a.source === 'authored' ? -1 : 1));
  return { quads, warnings };
}

function toQuad(m: Measured, prefix: 'Slot' | 'Auto', n: number): SlotQuad {
  return {
    id: slotId(prefix, n),
    index: n,
    source: prefix === 'Auto' ? 'generated' : 'authored',
    node: m.node,
    nodeName: m.nodeName,
    center: m.center,
    normal: m.normal,
    width: m.width,
    height: m.height,
  };
}
