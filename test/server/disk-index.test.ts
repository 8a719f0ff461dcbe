/**
 * The index of a byte-bounded cache directory (server/disk-index.ts, image variants and viewer
 * textures): least recently used out first, evictions reported (explicit deletes and replaced sizes
 * not), a file over the whole budget kept until the next one, empty files counted.
 */
import { describe, expect, it } from 'vitest';
import { diskCacheIndex } from '../../server/disk-index.ts';

describe('disk cache index', () => {
  it('evicts the least recently used beyond its bytes and reports only evictions', () => {
    const evicted: string[] = [];
    const index = diskCacheIndex(10, (name) => evicted.push(name));
    index.set('a', 4);
    index.set('b', 4);
    index.get('a'); // a read counts as a use: b is the oldest now
    index.set('c', 4);
    expect(evicted).toEqual(['b']);
    index.set('c', 3); // a new size for the same file is not an eviction
    index.delete('a'); // nor is an explicit delete
    expect(evicted).toEqual(['b']);
    expect([...index.keys()]).toEqual(['c']);
  });

  it('keeps a file larger than the whole budget, alone, until the next one is added', () => {
    const evicted: string[] = [];
    const index = diskCacheIndex(10, (name) => evicted.push(name));
    index.set('a', 3);
    index.set('huge', 50);
    expect(evicted).toEqual(['a']);
    expect(index.get('huge')).toBe(50);
    index.set('b', 1);
    expect(evicted).toEqual(['a', 'huge']);
    expect([...index.keys()]).toEqual(['b']);
  });

  it('indexes empty files', () => {
    const index = diskCacheIndex(10, () => {});
    index.set('empty', 0);
    expect(index.has('empty')).toBe(true);
  });
});
