/**
 * The index of a cache directory bounded by bytes (image variants, viewer textures): file name → size,
 * the least recently used evicted beyond the budget.
 */
import { LRUCache } from 'lru-cache';

/**
 * File names → sizes, least recently used evicted beyond `maxBytes`; `onEvict` hears each evicted name
 * (to remove its file), never an explicit delete or a replaced size. A file larger than the whole budget
 * counts as the whole budget, since lru-cache refuses an entry heavier than `maxSize` outright: the newest
 * file is always kept (it may be answered from disk right now) and goes when the next one is added.
 */
export function diskCacheIndex(maxBytes: number, onEvict: (name: string) => void): LRUCache<string, number> {
  return new LRUCache<string, number>({
    maxSize: maxBytes,
    // An empty file weighs 1: lru-cache sizes are positive integers.
    sizeCalculation: (size) => Math.min(maxBytes, Math.max(1, size)),
    dispose: (_size, name, reason) => {
      if (reason === 'evict') onEvict(name);
    },
  });
}
