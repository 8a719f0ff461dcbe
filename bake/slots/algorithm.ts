/**
 * The slot algorithm's revision, apart from the engine so that deciding what to re-bake (the
 * incremental key, bake/pipeline.ts) does not load the engine and its geometry libraries.
 */

/**
 * Names the slot algorithm revision; change it whenever the output of the engine can change.
 * (Part of the bake's incremental key: a new revision re-bakes every room.)
 * 2: stable pick sequence (numbered in pick order, seeded without the count), the previous
 *    anchors kept, the whole frame clear in front, anchors carried by the GLB's slot nodes.
 */
export const SLOT_ALGORITHM = 'slot-engine-2';
