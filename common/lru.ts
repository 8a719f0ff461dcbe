/**
 * The one bounded LRU of the project: a Map that forgets the least recently used entries first
 * (Map order = use order). Bounded by entry count, or by total weight when `weigh` is given (bytes of
 * files, say) — optionally both (`maxEntries`). `onEvict` hears about entries dropped to stay in
 * bounds (not about explicit deletes), e.g. to remove the file an index entry stands for.
 */
export interface LruOptions<K, V> {
  /** The weight of an entry (default 1: the capacity is an entry count). */
  weigh?: (value: V, key: K) => number;
  /** With `weigh`: also at most this many entries. */
  maxEntries?: number;
  onEvict?: (key: K, value: V) => void;
}

export class LruMap<K, V> {
  readonly map = new Map<K, V>();
  private weights: Map<K, number> | null;
  private total = 0;

  constructor(
    readonly capacity: number,
    private readonly options: LruOptions<K, V> = {},
  ) {
    this.weights = options.weigh ? new Map() : null;
  }

  /** The value, marked as just used. */
  get(key: K): V | undefined {
    const value = this.map.get(key);
    if (value !== undefined) {
      this.map.delete(key);
      this.map.set(key, value);
    }
    return value;
  }

  /** The value, without changing its position. */
  peek(key: K): V | undefined {
    return this.map.get(key);
  }

  has(key: K): boolean {
    return this.map.has(key);
  }

  /**
   * Store as the most recently used entry, then evict the least recently used beyond the bounds —
   * never the entry just stored (one heavier than the whole capacity goes with the next `set`).
   */
  set(key: K, value: V): void {
    this.delete(key);
    const weight = this.options.weigh ? this.options.weigh(value, key) : 1;
    this.map.set(key, value);
    this.weights?.set(key, weight);
    this.total += weight;
    const maxEntries = this.weights ? (this.options.maxEntries ?? Infinity) : this.capacity;
    while (this.total > this.capacity || this.map.size > maxEntries) {
      const oldest = this.map.keys().next().value as K;
      if (oldest === key) break;
      const evicted = this.map.get(oldest) as V;
      this.delete(oldest);
      this.options.onEvict?.(oldest, evicted);
    }
  }

  delete(key: K): boolean {
    if (!this.map.has(key)) return false;
    this.map.delete(key);
    if (this.weights) {
      this.total -= this.weights.get(key)!;
      this.weights.delete(key);
    } else this.total--;
    return true;
  }

  clear(): void {
    this.map.clear();
    this.weights?.clear();
    this.total = 0;
  }

  get size(): number {
    return this.map.size;
  }

  /** The total weight (the entry count without `weigh`). */
  get weight(): number {
    return this.total;
  }
}
