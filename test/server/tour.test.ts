/**
 * The tour over HTTP (real bake of the sample rooms, real server, fetch): per placement the path
 * starts at the room's spawn and passes every view in slot order; strong ETag and 304; 404 for an
 * unknown exhibition.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bakeRooms } from '../../bake/pipeline.ts';
import { writeSampleContent } from '../../bake/sample/generate.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { call, exhibitionDoc, register } from './guide/helpers.ts';

type P = [number, number, number];
const near = (a: P, b: P, tolerance: number) => Math.hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]) <= tolerance;

let s: TestServer;
beforeAll(async () => {
  const tmp = mkdtempSync(join(tmpdir(), 'museum-tour-'));
  await writeSampleContent(join(tmp, 'content'));
  await bakeRooms({ contentDir: join(tmp, 'content'), dataDir: join(tmp, 'data'), concurrency: 1 });
  s = await startTestServer({ dataDir: join(tmp, 'data') });
}, 600_000);
afterAll(() => s?.close());

describe('GET /v1/guide/exhibitions/{id}/tour', () => {
  it('walks from each spawn through every view in slot order; ETag and 304; 404 when unknown', async () => {
    const doc = exhibitionDoc({ id: 'tour-test' });
    expect((await register(s, doc)).status).toBe(200);
    const res = await call(s, 'GET', '/v1/guide/exhibitions/tour-test/tour');
    expect(res.status).toBe(200);
    const rooms = res.json.data.rooms as Array<{
      room: number;
      spawn: P | null;
      path: P[];
      length_m: number;
      stops: Array<{ view: { position: P } | null }>;
    }>;
    expect(rooms.map((r) => r.room)).toEqual([1, 2]);
    let viewed = 0;
    for (const room of rooms) {
      if (!room.spawn) continue;
      expect(room.path[0]).toEqual(room.spawn);
      let at = 0;
      for (const stop of room.stops) {
        if (!stop.view) continue;
        const found = room.path.findIndex((p, i) => i >= at && near(p, stop.view!.position, 0.2));
        expect(found).toBeGreaterThanOrEqual(at);
        at = found;
        viewed++;
      }
      expect(room.length_m).toBeGreaterThan(0);
    }
    expect(viewed).toBeGreaterThan(0);
    const etag = res.headers.etag as string;
    expect(etag).toMatch(/^"/);
    const again = await call(s, 'GET', '/v1/guide/exhibitions/tour-test/tour', undefined, { headers: { 'if-none-match': etag } });
    expect(again.status).toBe(304);
    const unknown = await call(s, 'GET', '/v1/guide/exhibitions/nobody-here/tour');
    expect(unknown.status).toBe(404);
    expect(unknown.json.errors[0].extensions.code).toBe('NOT_FOUND');
  }, 120_000);
});
