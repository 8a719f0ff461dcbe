/**
 * The one bounded LRU of the project: a Map that forgets the least recently used entries first
 * (Map order = use order). Bounded by entry count, or by total weight when `weigh` is given (bytes of
 * files, say) — optionally both (`maxEntries`). `onEvict` hears about entries dropped to stay in
 * bounds (not about explicit deletes), e.g. to remove the file an index entry stands for.
 *
 * A hit on an entry that is already among the newest quarter of the map does not move it again:
 * moving (a Map delete and set) is what makes an LRU hit cost more than a Map lookup, and a hot
 * working set is hit far more often than anything is evicted (measured: bench/RESULTS.md, "The LRU").
 * Eviction order is exact LRU for the older three quarters, and for maps of fewer than four entries.
 */
export interface LruOptions<K, V> {
  /** The weight of an entry (default 1: the capacity is an entry count). */
  weigh?: (value: V, key: K) => number;
  /** With `weigh`: also at most this many entries. */
  maxEntries?: number;
  onEvict?: (key: K, value: V) => void;
}

interface Entry<V> {
  value: V;
  weight: number;
  /** `moves` when the entry was last stored or moved to the newest end. */
  movedAt: number;
}

export class LruMap<K, V> {
  private readonly entries = new Map<K, Entry<V>>();
  private total = 0;
  /** Stores and moves so far: how far from the newest end an entry is, at most. */
  private moves = 0;
  private readonly maxEntries: number;
  /**
   * Where eviction looks for the oldest entry; every entry before it has been deleted. Kept, not made
   * anew: a new Map iterator steps over every deleted slot at the front of the table (V8 compacts
   * them only when it rehashes).
   */
  private cursor: Iterator<K> | undefined;

  constructor(
    readonly capacity: number,
    private readonly options: LruOptions<K, V> = {},
  ) {
    this.maxEntries = options.weigh ? (options.maxEntries ?? Infinity) : capacity;
  }

  /** The value, marked as just used. */
  get(key: K): V | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    if (this.moves - entry.movedAt > this.entries.size >> 2) {
      this.entries.delete(key);
      this.entries.set(key, entry);
      entry.movedAt = ++this.moves;
    }
    return entry.value;
  }

  /** The value, without changing its position. */
  peek(key: K): V | undefined {
    return this.entries.get(key)?.value;
  }

  has(key: K): boolean {
    return this.entries.has(key);
  }

  /**
   * Store as the most recently used entry, then evict the least recently used beyond the bounds —
   * never the entry just stored (one heavier than the whole capacity goes with the next `set`).
   */
  set(key: K, value: V): void {
    this.delete(key);
    const weight = this.options.weigh ? this.options.weigh(value, key) : 1;
    this.entries.set(key, { value, weight, movedAt: ++this.moves });
    this.total += weight;
    while (this.total > this.capacity || this.entries.size > this.maxEntries) {
      const oldest = this.oldest();
      if (oldest === key) {
        // The only entry left: the cursor has passed it, so the next eviction starts afresh.
        this.cursor = undefined;
        break;
      }
      const evicted = this.entries.get(oldest)!;
      this.delete(oldest);
      this.options.onEvict?.(oldest, evicted.value);
    }
  }

  /** The least recently used key (the map is not empty), the cursor moved past it. */
  private oldest(): K {
    let next = this.cursor?.next();
    if (next === undefined || next.done) {
      this.cursor = this.entries.keys();
      next = this.cursor.next();
    }
    return next.value as K;
  }

  delete(key: K): boolean {
    const entry = this.entries.get(key);
    if (entry === undefined) return false;
    this.entries.delete(key);
    this.total -= entry.weight;
    return true;
  }

  clear(): void {
    this.entries.clear();
    this.total = 0;
    this.cursor = undefined;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The total weight (the entry count without `weigh`). */
  get weight(): number {
    return this.total;
  }

  /** Keys and values, least recently used first. */
  *[Symbol.iterator](): IterableIterator<[K, V]> {
    for (const [key, entry] of this.entries) yield [key, entry.value];
  }

  *values(): IterableIterator<V> {
    for (const entry of this.entries.values()) yield entry.value;
  }
}
