/**
 * Rooms: `GET /v1/rooms` (keyed; all twelve fields, one body per bake), `GET /v1/rooms/{id}` (keyed;
 * one Room) and `GET /v1/rooms/{id}/slots` (public; the baked RoomSlotData verbatim as `{ data }`).
 * All are read from the content snapshot as SnapshotAnswers: strong ETag per representation, 304,
 * br/gzip compressed once per bake.
 */
import { z } from 'zod';
import { Room, RoomSlotData } from '../../artifacts/format.ts';
import { idParam, type RouteModule } from '../route-table.ts';
import { type ContentSnapshot, perSnapshot } from '../content.ts';
import { notFound } from '../errors.ts';
import { SLOTS_CACHE_CONTROL } from '../http-conditional.ts';
import { KEYED_CACHE_CONTROL, SnapshotResponse } from '../snapshot-response.ts';

const keyed = { cacheControl: KEYED_CACHE_CONTROL };

const roomList = perSnapshot((snapshot) => SnapshotResponse.of({ data: snapshot.rooms }, keyed));
const roomsById = perSnapshot((snapshot) => new Map(snapshot.rooms.map((room) => [room.id, SnapshotResponse.of({ data: room }, keyed)])));
/** The slot bodies were serialized when the snapshot was built: their bytes and ETags are kept. */
const slotsById = perSnapshot(
  (snapshot) =>
    new Map([...snapshot.slotBodies].map(([id, frozen]) => [id, new SnapshotResponse(frozen.body, { cacheControl: SLOTS_CACHE_CONTROL })])),
);

function roomResponse(snapshot: ContentSnapshot, id: number): SnapshotResponse {
  const response = roomsById(snapshot).get(id);
  if (!response) throw notFound('No room with this id');
  return response;
}

function slotsResponse(snapshot: ContentSnapshot, id: number): SnapshotResponse {
  const response = slotsById(snapshot).get(id);
  if (!response) throw notFound('No such room, or no slot data has been baked for it yet');
  return response;
}

export const roomRoutes: RouteModule = (api, { content }) => {
  // Each new bake's responses are prepared soon after it is installed, one kind per tick (issue 43:
  // never one long task); a request that comes first makes what it needs itself.
  const prepare = (snapshot: ContentSnapshot) => {
    const steps = [roomList, roomsById, slotsById];
    const next = () => {
      steps.shift()?.(snapshot);
      if (steps.length > 0) setImmediate(next);
    };
    setImmediate(next);
  };
  content.onChange(prepare);
  prepare(content.snapshot);

  api.route({
    method: 'GET',
    path: '/v1/rooms',
    operationId: 'listRooms',
    summary: 'All rooms of the museum with their model, image and slot-data URLs',
    tag: 'rooms',
    access: 'key',
    response: { json: z.object({ data: z.array(Room) }), precompressed: true },
    errors: [304],
    handler: (ctx) => roomList(content.snapshot).responseTo(ctx.req),
  });

  api.route({
    method: 'GET',
    path: '/v1/rooms/{id}',
    operationId: 'getRoom',
    summary: 'One room by id',
    tag: 'rooms',
    access: 'key',
    params: z.object({ id: idParam().describe('room id') }),
    response: { json: z.object({ data: Room }), precompressed: true },
    errors: [304, 404],
    handler: (ctx, { params }) => roomResponse(content.snapshot, params.id).responseTo(ctx.req),
  });

  api.route({
    method: 'GET',
    path: '/v1/rooms/{id}/slots',
    operationId: 'getRoomSlots',
    summary: "A room's baked wall-slot anchors (RoomSlotData, usable verbatim)",
    tag: 'rooms',
    access: 'public',
    params: z.object({ id: idParam().describe('room id') }),
    response: { json: z.object({ data: RoomSlotData }), precompressed: true },
    errors: [304, 404],
    handler: (ctx, { params }) => slotsResponse(content.snapshot, params.id).responseTo(ctx.req),
  });
};
