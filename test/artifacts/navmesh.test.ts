import { describe, expect, it } from 'vitest';
import { loadNavigation, readNavMeshGlb } from '../../artifacts/navmesh.js';
import { navMeshGlb } from '../../bake/navigation/glb.ts';

// A 10 m × 10 m floor with a 2 m × 2 m hole in the middle (a pillar's footprint).
function floorWithHole(): { positions: number[]; indices: number[] } {
  const positions: number[] = [];
  const indices: number[] = [];
  const quad = (x0: number, z0: number, x1: number, z1: number) => {
    const base = positions.length / 3;
    positions.push(x0, 0, z0, x1, 0, z0, x1, 0, z1, x0, 0, z1);
    indices.push(base, base + 2, base + 1, base, base + 3, base + 2);
  };
  quad(-5, -5, 5, -1);
  quad(-5, 1, 5, 5);
  quad(-5, -1, -1, 1);
  quad(1, -1, 5, 1);
  return { positions, indices };
}

describe('navmesh queries', () => {
  it('reads the NavMesh GLB the bake writes, from a Buffer view too', async () => {
    const { positions, indices } = floorWithHole();
    const glb = await navMeshGlb(Float32Array.from(positions), Uint32Array.from(indices));
    const padded = Buffer.concat([Buffer.alloc(3), Buffer.from(glb)]).subarray(3);
    const read = readNavMeshGlb(padded);
    expect(Array.from(read.positions)).toEqual(positions);
    expect(Array.from(read.indices)).toEqual(indices);
  });

  it('finds closest points, paths round the hole, slides along edges and tells on/off', async () => {
    const { positions, indices } = floorWithHole();
    const nav = await loadNavigation(positions, indices);
    try {
      const near = nav.closestPoint([0, 1, -3]);
      expect(near).not.toBeNull();
      expect(Math.abs((near?.[1] ?? 9) - 0)).toBeLessThan(0.3);
      expect(nav.isOnMesh([3, 0, 3])).toBe(true);
      expect(nav.isOnMesh([0, 0, 0])).toBe(false);
      expect(nav.isOnMesh([30, 0, 3])).toBe(false);
      const path = nav.path([0, 0, -3], [0, 0, 3]);
      expect(path.length).toBeGreaterThan(2); // goes round the hole, not through it
      expect(path[0][2]).toBeCloseTo(-3, 0);
      expect(path.at(-1)?.[2]).toBeCloseTo(3, 0);
      for (const p of path) expect(Math.abs(p[0]) >= 0.9 || Math.abs(p[2]) >= 0.9).toBe(true);
      const moved = nav.moveAlong([4, 0, 4], [8, 0, 4]); // walks into the outer edge
      expect(moved[0]).toBeLessThanOrEqual(5.01);
      expect(moved[0]).toBeGreaterThan(4.5);
      expect(nav.triangles().indices.length).toBeGreaterThan(0);
    } finally {
      nav.destroy();
    }
  });
});
