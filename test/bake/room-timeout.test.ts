// The room time limit bounds the room's whole work, native image work included (decisions.md): a
// room stopped at the limit leaves nothing running, so the room behind it bakes at once. With rooms
// in worker threads, a stopped room's queued sharp jobs ran on in the process's thread pool for
// tens of seconds (60 textures of 4096²: the next room finished 27 s after the stop).
import { mkdtempSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readManifest } from '../../artifacts/store.ts';
import { bakeRooms, type RoomOutcome } from '../../bake/pipeline.ts';
import { manyTexturesGlb } from '../helpers/hostile-textures.ts';
import { contentRoom, smallRoomGlb } from './fixtures.ts';

const tmp = (prefix: string) => mkdtempSync(join(tmpdir(), prefix));
const room = contentRoom;

describe('room time limit', () => {
  it('a room stopped at the limit with its image work queued leaves none of it running: the next room bakes at once', async () => {
    const content = tmp('museum-native-');
    await writeFile(join(content, 'good.glb'), await smallRoomGlb());
    await writeFile(join(content, 'textures.glb'), await manyTexturesGlb(60, 4096));
    await writeFile(join(content, 'rooms.json'), JSON.stringify([room(1, 'good.glb'), room(2, 'textures.glb')]));
    const data = tmp('museum-native-data-');
    const settledAt = new Map<number, { outcome: RoomOutcome; at: number }>();
    // One lane: the big room (biggest first) is stopped, then the good room runs after it.
    const summary = await bakeRooms({
      contentDir: content,
      dataDir: data,
      concurrency: 1,
      roomTimeoutMs: 2_000,
      onEvent: (event) => {
        if (event.type === 'room') settledAt.set(event.outcome.id, { outcome: event.outcome, at: performance.now() });
      },
    });
    const stopped = settledAt.get(2)!;
    const next = settledAt.get(1)!;
    expect(stopped.outcome).toMatchObject({ status: 'failed', reason: 'took longer than 2 s (stopped)' });
    expect(next.outcome.status, next.outcome.reason).toBe('baked');
    expect(next.at).toBeGreaterThan(stopped.at);
    // The good room alone takes well under a second; the stopped room's ~60 queued texture jobs
    // would hold the image threads for 15–30 s on this machine. Generous bound.
    expect(next.at - stopped.at).toBeLessThan(10_000);
    expect(summary.failed).toBe(1);
    expect((await readManifest(data))?.rooms.map((r) => r.id)).toEqual([1]);
  }, 120_000);
});
