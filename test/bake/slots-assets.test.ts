/**
 * The engine on real third-party rooms (../shared/assets/rooms: furniture in front of walls;
 * cube-room has a rotated root): N = 8 and 24 must give exactly N valid anchors; N = 60 is
 * recorded (placed count or shortfall) and whatever is placed must be valid too.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readModelFile } from '../../bake/gltf-io.ts';
import { computeSlots } from '../../bake/slots/index.ts';
import { SHARED_ASSETS } from './fixtures.ts';
import { anchorProblems, bruteWorld } from './rooms/geometry.ts';

const ROOMS_DIR = join(SHARED_ASSETS, 'rooms');
const rooms = readdirSync(ROOMS_DIR)
  .filter((f) => f.endsWith('.glb'))
  .sort();
const SHA = '9'.repeat(64);

describe('slot engine on the shared third-party rooms', () => {
  it('finds the rooms', () => {
    expect(rooms).toEqual(['cube-room.glb', 'garage.glb']);
  });

  it.each(rooms)('%s: exactly N valid anchors for N = 8 and 24; N = 60 recorded', async (file) => {
    const document = await readModelFile(join(ROOMS_DIR, file));
    const world = bruteWorld(document);
    for (const n of [8, 24]) {
      const result = computeSlots(document, { roomId: 1, onchainSlots: n, modelSha256: SHA });
      expect(result.kind, `${file} N=${n}`).toBe('room');
      expect(result.shortfall, `${file} N=${n}`).toBeNull();
      expect(result.slots, `${file} N=${n}`).toHaveLength(n);
      expect(anchorProblems(world, result.slots, 'room'), `${file} N=${n}`).toEqual([]);
    }
    const sixty = computeSlots(document, { roomId: 1, onchainSlots: 60, modelSha256: SHA });
    const sizes = sixty.slots.map((s) => s.width);
    console.info(
      `${file}: N=60 → ${sixty.slots.length} placed${sixty.shortfall ? ` (shortfall: ${sixty.shortfall.reason})` : ''}, frame ` +
        `sizes ${Math.min(...sizes)}–${Math.max(...sizes)} m`,
    );
    if (sixty.slots.length < 60) expect(sixty.shortfall?.placed).toBe(sixty.slots.length);
    expect(anchorProblems(world, sixty.slots, 'room'), `${file} N=60`).toEqual([]);
  });

  it('gives the same anchors on every run (fresh read of the file)', async () => {
    const path = join(ROOMS_DIR, 'garage.glb');
    const first = computeSlots(await readModelFile(path), { roomId: 4, onchainSlots: 24, modelSha256: SHA });
    const second = computeSlots(await readModelFile(path), { roomId: 4, onchainSlots: 24, modelSha256: SHA });
    expect(JSON.stringify(second)).toBe(JSON.stringify(first));
  });
});
