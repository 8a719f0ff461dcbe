/**
 * What a re-bake does to the published anchors, per room: kept (same id, same pose), moved (same id,
 * another pose — re-seated or regenerated; with the largest move), added and removed ids. Operators
 * read it (summary table, --json, QA report) before publishing: curators hang artworks by slot id.
 */
import type { RoomSlot } from '../../artifacts/format.ts';
import { angleDeg, distance, rotateByQuaternion, type V3 } from '../../common/vec.ts';

export interface SlotChanges {
  kept: number;
  moved: number;
  /** Largest position change of a moved anchor, metres (0 when none moved). */
  largest_move: number;
  added: number;
  removed: number;
  /** False on a room's first bake (everything is added). */
  had_previous: boolean;
}

/** Same pose: within 1 mm, 0.1° and 1 mm of size. */
const POSITION_TOLERANCE = 1e-3;
const ANGLE_TOLERANCE = 0.1;
const AXES: V3[] = [
  [1, 0, 0],
  [0, 1, 0],
  [0, 0, 1],
];

export function compareSlots(previous: readonly RoomSlot[] | null, next: readonly RoomSlot[]): SlotChanges {
  const before = new Map((previous ?? []).map((s) => [s.id, s]));
  const changes: SlotChanges = { kept: 0, moved: 0, largest_move: 0, added: 0, removed: 0, had_previous: previous !== null };
  for (const slot of next) {
    const old = before.get(slot.id);
    if (!old) {
      changes.added++;
      continue;
    }
    before.delete(slot.id);
    const move = distance(slot.position, old.position);
    const turn = Math.max(...AXES.map((a) => angleDeg(rotateByQuaternion(slot.quaternion, a), rotateByQuaternion(old.quaternion, a))));
    const resized = Math.abs(slot.width - old.width) > POSITION_TOLERANCE || Math.abs(slot.height - old.height) > POSITION_TOLERANCE;
    if (move <= POSITION_TOLERANCE && turn <= ANGLE_TOLERANCE && !resized) changes.kept++;
    else {
      changes.moved++;
      changes.largest_move = Math.max(changes.largest_move, Math.round(move * 1000) / 1000);
    }
  }
  changes.removed = before.size;
  return changes;
}

/** "8 kept, 2 moved (largest 0.031 m), 4 added, 0 removed". */
export function describeSlotChanges(c: SlotChanges): string {
  if (!c.had_previous) return `${c.added} added (first bake)`;
  const largest = c.moved ? ` (largest ${c.largest_move.toFixed(3)} m)` : '';
  return `${c.kept} kept, ${c.moved} moved${largest}, ${c.added} added, ${c.removed} removed`;
}
