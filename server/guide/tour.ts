/**
 * The tour of an exhibition (decisions.md "Walkable rooms"): per placement, in order, the room,
 * its spawn and the hung artworks in slot order (artwork i hangs in slot i + 1) with their views,
 * and the walking route on the room's navmesh from the spawn through every view (Detour's own path
 * query). Stops without a view are listed and skipped by the path.
 */
import { promises as fs } from 'node:fs';
import { z } from 'zod';
import { type Navigation, loadNavigationGlb, type Vec3 } from '../../artifacts/navmesh.ts';
import { filePath } from '../../artifacts/format.ts';
import type { ContentSnapshot } from '../content.ts';
import type { GuideContext } from './exhibitions.ts';

const Point = z.tuple([z.number(), z.number(), z.number()]);

const TourRoom = z
  .object({
    uid: z.string().describe('placement uid'),
    room: z.number().int().describe('museum room id'),
    spawn: Point.nullable().describe("the room's spawn (null when the room has no navmesh)"),
    stops: z.array(
      z.object({
        slot: z.string().nullable().describe('the slot the artwork hangs in (null when the room has fewer slots)'),
        artwork: z.number().int().nullable(),
        title: z.string(),
        view: z.object({ position: Point, distance: z.number() }).nullable().describe('null: listed, skipped by the path'),
      }),
    ),
    path: z.array(Point).describe('walking route on the navmesh from spawn through every view, in order'),
    length_m: z.number().describe('length of path in metres'),
  })
  .meta({ id: 'TourRoom' });

export const Tour = z.object({ exhibition: z.string(), rooms: z.array(TourRoom) }).meta({ id: 'Tour' });
export type Tour = z.infer<typeof Tour>;

type SlotRecord = { id: string; index: number; view?: { position: Vec3; distance: number } | null };

/** Navmeshes of a snapshot's rooms, loaded once each (room id → navigation or null). */
const navigations = new WeakMap<ContentSnapshot, Map<number, Promise<Navigation | null>>>();

function navigationOf(snapshot: ContentSnapshot, dataDir: string, roomId: number): Promise<Navigation | null> {
  let rooms = navigations.get(snapshot);
  if (!rooms) navigations.set(snapshot, (rooms = new Map()));
  let nav = rooms.get(roomId);
  if (!nav) {
    const ref = snapshot.manifest.rooms.find((r) => r.id === roomId)?.navmesh ?? null;
    nav = ref ? fs.readFile(filePath(dataDir, ref)).then((glb) => loadNavigationGlb(glb)) : Promise.resolve(null);
    rooms.set(roomId, nav);
  }
  return nav;
}

function slotsOf(snapshot: ContentSnapshot, roomId: number): SlotRecord[] {
  const frozen = snapshot.slotBodies.get(roomId);
  if (!frozen) return [];
  const slots = (JSON.parse(frozen.body.toString('utf8')) as { data: { slots: SlotRecord[] } }).data.slots;
  return [...slots].sort((a, b) => a.index - b.index);
}

const round3 = (v: number) => Math.round(v * 1000) / 1000;

/** Spawn → each view in turn, joined into one route; its length in metres. */
function routeThrough(nav: Navigation, spawn: Vec3, views: Vec3[]): { path: Vec3[]; length_m: number } {
  const path: Vec3[] = [spawn];
  let from = spawn;
  for (const to of views) {
    const leg = nav.path(from, to);
    path.push(...(leg.length ? leg.slice(1) : [to]));
    from = to;
  }
  let length = 0;
  for (let i = 1; i < path.length; i++) length += Math.hypot(...(path[i]!.map((c, k) => c - path[i - 1]![k]!) as Vec3));
  return { path: path.map((p) => p.map(round3) as Vec3), length_m: round3(length) };
}

export async function tourOf(context: GuideContext, snapshot: ContentSnapshot, dataDir: string): Promise<Tour> {
  const rooms: Tour['rooms'] = [];
  for (const placement of context.rooms) {
    const slots = slotsOf(snapshot, placement.id);
    const room = snapshot.rooms.find((r) => r.id === placement.id);
    const spawn = (room?.spawn ?? null) as Vec3 | null;
    const stops = context.artworks
      .filter((a) => a.roomUid === placement.uid)
      .map((a, i) => ({ slot: slots[i]?.id ?? null, artwork: a.id, title: a.title, view: slots[i]?.view ?? null }));
    const nav = spawn ? await navigationOf(snapshot, dataDir, placement.id) : null;
    const views = stops.flatMap((s) => (s.view ? [s.view.position] : []));
    const route = nav && spawn ? routeThrough(nav, spawn, views) : { path: [], length_m: 0 };
    rooms.push({ uid: placement.uid, room: placement.id, spawn, stops, ...route });
  }
  return { exhibition: context.id, rooms };
}
