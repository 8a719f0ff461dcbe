/**
 * Rooms: `GET /v1/rooms` (keyed; all twelve fields, one body per bake) and
 * `GET /v1/rooms/{id}/slots` (public; the baked RoomSlotData verbatim as `{ data }`, strong ETag, 304).
 * Both are read from the content snapshot (fast path and Koa alike).
 */
import type { IncomingMessage } from 'node:http';
import { z } from 'zod';
import { RoomSlotData } from '../../artifacts/format.ts';
import { idParam, type RouteModule } from '../api.ts';
import { type ContentSnapshot, type FrozenBody, freeze, perSnapshot, Room } from '../content.ts';
import { notFound } from '../errors.ts';
import { etagMatches, JSON_TYPE, SLOTS_CACHE_CONTROL } from '../http-conditional.ts';
import type { Headers, RawAnswer } from '../types.ts';

const roomListBody = perSnapshot((snapshot) => freeze({ data: snapshot.rooms }).body);

/** A room's slot data with both of its answers, built once per bake. */
interface PreparedSlots {
  ok: RawAnswer;
  notModified: RawAnswer;
  etag: string;
}

const prepareSlots = (frozen: FrozenBody): PreparedSlots => {
  const notModified: Headers = { ETag: frozen.etag, 'Cache-Control': SLOTS_CACHE_CONTROL };
  return {
    etag: frozen.etag,
    notModified: { status: 304, headers: notModified, body: null },
    ok: { status: 200, headers: { 'Content-Type': JSON_TYPE, 'Content-Length': String(frozen.body.length), ...notModified }, body: frozen.body },
  };
};

const preparedSlots = perSnapshot((snapshot) => new Map([...snapshot.slotBodies].map(([id, frozen]) => [id, prepareSlots(frozen)])));

function slotsAnswer(snapshot: ContentSnapshot, id: number, req: IncomingMessage): RawAnswer {
  const prepared = preparedSlots(snapshot).get(id);
  if (!prepared) throw notFound('No such room, or no slot data has been baked for it yet');
  return etagMatches(req.headers['if-none-match'], prepared.etag) ? prepared.notModified : prepared.ok;
}

export const roomRoutes: RouteModule = (api, { content }) => {
  // Each new bake's answers are prepared as soon as it is installed, not on first request.
  content.onChange((snapshot) => void preparedSlots(snapshot));
  preparedSlots(content.snapshot);

  api.route({
    method: 'GET',
    path: '/v1/rooms',
    summary: 'All rooms of the museum with their model, image and slot-data URLs',
    tag: 'rooms',
    access: 'key',
    response: { json: z.object({ data: z.array(Room) }) },
    fast: () => () => roomListBody(content.snapshot),
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
    fast: ({ params }, req) => () => slotsAnswer(content.snapshot, params.id, req),
  });
};
