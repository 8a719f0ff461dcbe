/**
 * Public responses whose body is the same for every request (an exhibition's guide context, its
 * suggestions for a seed, its tour), serialized and compressed once per version instead of per
 * request (issue 43): each key keeps the SnapshotResponse of its latest version (strong ETag, 304,
 * br/gzip made once); a new version replaces it. Bounded by bytes, least recently used out first.
 */
import { LRUCache } from 'lru-cache';
import { SnapshotResponse, type SnapshotResponseOptions } from './snapshot-response.ts';

export interface VersionedResponsesOptions extends SnapshotResponseOptions {
  /** Identity bytes kept in all (the compressed forms add at most as much again). */
  maxBytes?: number;
}

/** The defaults of VersionedResponsesOptions, exported beside them as glTF-Transform's functions do. @public */
export const VERSIONED_RESPONSES_DEFAULTS = { maxBytes: 32 * 1024 * 1024 } as const;

interface Entry {
  version: string;
  response: SnapshotResponse;
}

export class VersionedResponses {
  private readonly entries: LRUCache<string, Entry>;

  constructor(private readonly options: VersionedResponsesOptions) {
    this.entries = new LRUCache({
      maxSize: options.maxBytes ?? VERSIONED_RESPONSES_DEFAULTS.maxBytes,
      sizeCalculation: (entry) => Math.max(1, entry.response.body.length),
    });
  }

  /** The response of `key` at `version`; `make` gives its value only when this version is not cached yet. */
  get(key: string, version: string, make: () => unknown): SnapshotResponse {
    const found = this.entries.get(key);
    if (found?.version === version) return found.response;
    const response = SnapshotResponse.of(make(), this.options);
    this.entries.set(key, { version, response });
    return response;
  }

  get size(): number {
    return this.entries.size;
  }
}
