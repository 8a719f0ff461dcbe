/**
 * How a slot is classified and coloured wherever people look at anchors — the QA report's plans
 * and the 3D viewer — so both speak the same legend. Plain data: the browser bundle imports it.
 */
import type { RoomSlot } from './format.ts';

export const SLOT_COLOURS = {
  authored: '#1f6feb',
  generated: '#1a7f37',
  flipped: '#d97706',
  ambiguous: '#cf222e',
} as const;
export type SlotCategory = keyof typeof SLOT_COLOURS;

/** Ambiguous wins over flipped, flipped over the source. */
export const slotCategory = (s: Pick<RoomSlot, 'ambiguous' | 'flipped' | 'source'>): SlotCategory =>
  s.ambiguous ? 'ambiguous' : s.flipped ? 'flipped' : s.source;

export const SLOT_LEGEND: Array<[SlotCategory, string]> = [
  ['authored', 'authored (Slot_NNN), facing as authored'],
  ['generated', 'generated (Auto_NNN)'],
  ['flipped', 'authored normal pointed into the wall: flipped'],
  ['ambiguous', 'ambiguous: the interior tie-break decided'],
];
