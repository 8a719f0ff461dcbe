/**
 * The slot engine: one implementation of extract (authored Slot_NNN / Auto_NNN nodes), probe
 * (two-sided facing via a BVH) and generate (Auto_NNN anchors from the onchain count), used by the
 * bake and its tests. INTERFACE ONLY for now — the implementation is being written.
 */
import type { Document } from '@gltf-transform/core';
import type { RoomSlot, SlotShortfall } from '../../artifacts/format.ts';

/** Names the slot algorithm revision; change it whenever the output of the engine can change. */
export const SLOT_ALGORITHM = 'slots-0';

export type RoomKind = 'room' | 'sculpture';

export interface SlotEngineOptions {
  roomId: number;
  /** Onchain slot count N: how many anchors the room must offer. */
  onchainSlots: number;
  /** sha256 of the source model bytes; seeds generation so re-bakes give the same anchors. */
  modelSha256: string;
  /** Interior room or sculpture; detected from the geometry when omitted. */
  kind?: RoomKind;
}

export interface SlotEngineResult {
  slots: RoomSlot[];
  warnings: string[];
  shortfall: SlotShortfall | null;
  kind: RoomKind;
}

export function computeSlots(_document: Document, _options: SlotEngineOptions): SlotEngineResult {
  throw new Error('slot engine not implemented yet');
}

/** Embed generated anchors as `Auto_NNN` placeholder quads (material `Slot Placeholder`). */
export function embedGeneratedSlots(_document: Document, _slots: RoomSlot[]): void {
  throw new Error('slot engine not implemented yet');
}
