import { createHash } from 'node:crypto';

/**
 * mulberry32: the project's one small seedable PRNG, for anything that must not depend on
 * Math.random (slot generation, sample content, test inputs, fakes).
 */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The same generator seeded from any string (its sha256): same seed, same sequence, everywhere. */
export function seededRandom(seed: string): () => number {
  return mulberry32(createHash('sha256').update(seed).digest().readUInt32LE(0));
}
