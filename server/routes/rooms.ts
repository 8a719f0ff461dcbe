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
import { KEYED_CACHE_CONTROL, SnapshotAnswer } from '../snapshot-answer.ts';

const keyed = { cacheControl: KEYED_CACHE_CONTROL };

const roomList = perSnapshot((snapshot) => SnapshotAnswer.of({ data: snapshot.rooms }, keyed));
const roomsById = perSnapshot((snapshot) => new Map(snapshot.rooms.map((room) => [room.id, SnapshotAnswer.of({ data: room }, keyed)])));
/** The slot bodies were serialized when the snapshot was built: their bytes and ETags are kept. */
const slotsById = perSnapshot(
  (snapshot) =>
    new Map([...snapshot.slotBodies].map(([id, frozen]) => [id, new SnapshotAnswer(frozen.body, { cacheControl: SLOTS_CACHE_CONTROL })])),
);

function roomAnswer(snapshot: ContentSnapshot, id: number): SnapshotAnswer {
  const answer = roomsById(snapshot).get(id);
  if (!answer) throw notFound('No room with this id');
  return answer;
}

function slotsAnswer(snapshot: ContentSnapshot, id: number): SnapshotAnswer {
  const answer = slotsById(snapshot).get(id);
  if (!answer) throw notFound('No such room, or no slot data has been baked for it yet');
  return answer;
}

export const roomRoutes: RouteModule = (api, { content }) => {
  // Each new bake's answers are prepared soon after it is installed, one kind per tick (issue 43:
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
    handler: (ctx) => roomList(content.snapshot).answer(ctx.req),
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
    handler: (ctx, { params }) => roomAnswer(content.snapshot, params.id).answer(ctx.req),
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
    handler: (ctx, { params }) => slotsAnswer(content.snapshot, params.id).answer(ctx.req),
  });
};
