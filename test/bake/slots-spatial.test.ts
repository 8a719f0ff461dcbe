/**
 * The engine's spatial helpers: the hash grid answers exactly what a brute-force scan answers,
 * and the frame boxes clash exactly when frames overlap or come closer than the gap on a wall.
 */
import { describe, expect, it } from 'vitest';
import type { V3 } from '../../common/vec.ts';
import { levelledFrame } from '../../bake/slots/orient.ts';
import { boxesOverlap, frameBox, SpatialHash } from '../../bake/slots/spatial.ts';
import { mulberry32 } from '../../common/random.ts';

describe('slot engine: spatial helpers', () => {
  it('hash grid neighbours equal a brute-force scan, for small and very wide queries', () => {
    const random = mulberry32(42);
    const points: V3[] = Array.from({ length: 400 }, () => [random() * 40 - 20, random() * 6, random() * 30 - 15]);
    const grid = new SpatialHash(1.5);
    points.forEach((p, i) => grid.insert(i, p));
    for (let q = 0; q < 200; q++) {
      const centre: V3 = [random() * 44 - 22, random() * 8 - 1, random() * 34 - 17];
      const radius = q % 10 === 0 ? 60 : random() * 4;
      const expected = points
        .map((p, i) => [p, i] as const)
        .filter(([p]) => Math.hypot(p[0] - centre[0], p[1] - centre[1], p[2] - centre[2]) <= radius)
        .map(([, i]) => i);
      expect(grid.near(centre, radius)).toEqual(expected);
    }
  });

  it('frames clash when closer than the gap on one wall, not back to back or across a corner', () => {
    const north = levelledFrame([0, 0, 1]);
    const south = levelledFrame([0, 0, -1]);
    const east = levelledFrame([-1, 0, 0]);
    const gap = 0.1;
    const a = frameBox([0, 1.5, 0.005], north, 1, 1, gap);
    // Side by side on the same wall: 1.05 m apart leaves 5 cm (< gap), 1.15 m leaves 15 cm.
    expect(boxesOverlap(a, frameBox([1.05, 1.5, 0.005], north, 1, 1, gap))).toBe(true);
    expect(boxesOverlap(a, frameBox([1.15, 1.5, 0.005], north, 1, 1, gap))).toBe(false);
    expect(boxesOverlap(a, frameBox([0.3, 2.0, 0.005], north, 0.5, 0.5, gap))).toBe(true);
    // Back to back on a zero-thickness partition: no clash.
    expect(boxesOverlap(a, frameBox([0, 1.5, -0.005], south, 1, 1, gap))).toBe(false);
    // A concave corner (wall x = 2 facing −x): clear when both keep half a gap from the corner.
    const corner = frameBox([1.995, 1.5, 0.56], east, 1, 1, gap);
    expect(boxesOverlap(frameBox([1.4, 1.5, 0.005], north, 1, 1, gap), corner)).toBe(false);
    expect(boxesOverlap(frameBox([1.6, 1.5, 0.005], north, 1, 1, gap), corner)).toBe(true);
  });
});
