/**
 * Rooms: `GET /v1/rooms` (keyed; all twelve fields, one body per bake) and
 * `GET /v1/rooms/{id}/slots` (public; the baked RoomSlotData verbatim as `{ data }`, strong ETag, 304).
 * Slot data is an immutable artifact of a bake, so the fast path answers it; the Koa route below gives
 * the identical answer for what the fast path hands over.
 */
import { z } from 'zod';
import { RoomSlotData } from '../../artifacts/format.ts';
import type { RouteModule } from '../app.ts';
import { freeze, perSnapshot, Room } from '../content.ts';
import { notFound } from '../errors.ts';
import { etagMatches, JSON_TYPE, keyedReadsFastPath, preparedSlotBodies, slotsFastPath, type SnapshotRead } from '../fastpath.ts';
import { idParam } from '../api.ts';

const roomListBody = perSnapshot((snapshot) => freeze({ data: snapshot.rooms }).body);

const roomReads: SnapshotRead = (pathname) => (pathname === '/v1/rooms' ? roomListBody : undefined);

export const roomRoutes: RouteModule = (api, services) => {
  const { content, log, addFastPath } = services;
  addFastPath(slotsFastPath(content, log));
  addFastPath(keyedReadsFastPath(services, '/v1/rooms', roomReads));

  api.route({
    method: 'GET',
    path: '/v1/rooms',
    summary: 'All rooms of the museum with their model, image and slot-data URLs',
    tag: 'rooms',
    access: 'key',
    response: { json: z.object({ data: z.array(Room) }) },
    handler(ctx) {
      ctx.type = JSON_TYPE;
      ctx.body = roomListBody(content.snapshot);
    },
  });

  api.route({
    method: 'GET',
    path: '/v1/rooms/{id}/slots',
    summary: "A room's baked wall-slot anchors (RoomSlotData, usable verbatim)",
    tag: 'rooms',
    access: 'public',
    params: z.object({ id: idParam().describe('room id') }),
    response: { json: z.object({ data: RoomSlotData }) },
    errors: [304, 404],
    handler(ctx, { params }) {
      const prepared = preparedSlotBodies(content.snapshot).get(params.id);
      if (!prepared) throw notFound('No such room, or no slot data has been baked for it yet');
      if (etagMatches(ctx.get('if-none-match') || undefined, prepared.frozen.etag)) {
        ctx.status = 304;
        ctx.set(prepared.notModified);
        return;
      }
      ctx.set(prepared.full);
      ctx.body = prepared.frozen.body;
    },
  });
};
