/**
 * The one bounded LRU: bounds by count and by weight, least recently used out first, never the entry
 * just stored, and hits on the newest quarter that cost a lookup only — without letting a hot entry
 * be evicted.
 */
import { describe, expect, it } from 'vitest';
import { LruMap } from '../../common/lru.ts';
import { mulberry32 } from '../../common/random.ts';

describe('LruMap', () => {
  it('evicts the least recently used entry first (exact on small maps)', () => {
    const lru = new LruMap<string, number>(3);
    lru.set('a', 1);
    lru.set('b', 2);
    lru.set('c', 3);
    expect(lru.get('a')).toBe(1);
    lru.set('d', 4); // b is the oldest now
    expect([...lru].map(([k]) => k)).toEqual(['c', 'a', 'd']);
    expect(lru.peek('c')).toBe(3); // peek does not refresh
    lru.set('e', 5);
    expect(lru.has('c')).toBe(false);
    expect(lru.size).toBe(3);
  });

  it('bounds by weight, and by entries too when asked, telling onEvict', () => {
    const evicted: string[] = [];
    const lru = new LruMap<string, Buffer>(10, { weigh: (b) => b.length, maxEntries: 3, onEvict: (k) => evicted.push(k) });
    lru.set('a', Buffer.alloc(4));
    lru.set('b', Buffer.alloc(4));
    lru.set('c', Buffer.alloc(4)); // 12 > 10: a goes
    expect(evicted).toEqual(['a']);
    expect(lru.weight).toBe(8);
    lru.set('d', Buffer.alloc(1));
    lru.set('e', Buffer.alloc(1)); // four entries > 3: b goes
    expect(evicted).toEqual(['a', 'b']);
    lru.delete('c'); // explicit deletes are not evictions
    expect(evicted).toEqual(['a', 'b']);
    expect(lru.weight).toBe(2);
    lru.set('big', Buffer.alloc(50)); // heavier than the whole capacity: kept until the next set
    expect(lru.has('big')).toBe(true);
    expect(evicted).toEqual(['a', 'b', 'd', 'e']);
    lru.set('f', Buffer.alloc(1));
    expect(lru.has('big')).toBe(false);
  });

  it('replacing a key re-weighs it and makes it the newest', () => {
    const lru = new LruMap<string, string>(100, { weigh: (v) => v.length });
    lru.set('a', 'x'.repeat(10));
    lru.set('b', 'y');
    lru.set('a', 'z'.repeat(3));
    expect(lru.weight).toBe(4);
    expect([...lru.values()]).toEqual(['y', 'zzz']);
  });

  it('keeps a hot entry through any amount of churn, while its hits rarely move it', () => {
    const lru = new LruMap<number, number>(1000);
    lru.set(-1, -1);
    for (let i = 0; i < 100_000; i++) {
      lru.set(i, i);
      expect(lru.get(-1)).toBe(-1); // hit on every step: it must never be the oldest
    }
    expect(lru.size).toBe(1000);
    // Hits on the newest quarter do not reorder: the order of the older entries is untouched.
    const before = [...lru].map(([k]) => k);
    for (const key of before.slice(-200)) lru.get(key);
    expect([...lru].map(([k]) => k)).toEqual(before);
    // A hit on an old entry moves it to the newest end.
    lru.get(before[0]!);
    expect([...lru].map(([k]) => k).at(-1)).toBe(before[0]);
  });

  it('evicts exactly the oldest entries in iteration order through any mix of sets, hits, deletes and clears', () => {
    const random = mulberry32(13);
    const evicted: number[] = [];
    const lru = new LruMap<number, number>(40, { weigh: (w) => w, maxEntries: 12, onEvict: (k) => evicted.push(k) });
    for (let step = 0; step < 20_000; step++) {
      const key = Math.floor(random() * 30);
      const roll = random();
      if (roll < 0.45) {
        const before = [...lru].map(([k]) => k).filter((k) => k !== key);
        const weight = random() < 0.02 ? 50 : 1 + Math.floor(random() * 6); // now and then heavier than the capacity
        evicted.length = 0;
        lru.set(key, weight);
        expect(evicted).toEqual(before.slice(0, evicted.length));
        expect(lru.size === 1 || (lru.weight <= 40 && lru.size <= 12)).toBe(true);
        expect([...lru].map(([k]) => k)).toEqual([...before.slice(evicted.length), key]);
      } else if (roll < 0.9) lru.get(key);
      else if (roll < 0.995) lru.delete(key);
      else lru.clear();
      expect(lru.weight).toBe([...lru.values()].reduce((sum, w) => sum + w, 0));
    }
  });
});
