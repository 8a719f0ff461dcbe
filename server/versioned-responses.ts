/**
 * Public answers whose body is the same for every request (an exhibition's guide context, its
 * suggestions for a seed, its tour), serialized and compressed once per version instead of per
 * request (issue 43): each key keeps the SnapshotAnswer of its latest version (strong ETag, 304,
 * br/gzip made once); a new version replaces it. Bounded by bytes, least recently used out first.
 */
import { LRUCache } from 'lru-cache';
import { SnapshotAnswer, type SnapshotAnswerOptions } from './snapshot-answer.ts';

export interface VersionedAnswersOptions extends SnapshotAnswerOptions {
  /** Identity bytes kept in all (the compressed forms add at most as much again). */
  maxBytes?: number;
}

export const VERSIONED_ANSWERS_DEFAULTS = { maxBytes: 32 * 1024 * 1024 } as const;

interface Entry {
  version: string;
  answer: SnapshotAnswer;
}

export class VersionedAnswers {
  private readonly entries: LRUCache<string, Entry>;

  constructor(private readonly options: VersionedAnswersOptions) {
    this.entries = new LRUCache({
      maxSize: options.maxBytes ?? VERSIONED_ANSWERS_DEFAULTS.maxBytes,
      sizeCalculation: (entry) => Math.max(1, entry.answer.body.length),
    });
  }

  /** The answer of `key` at `version`; `make` gives its value only when this version is not cached yet. */
  answer(key: string, version: string, make: () => unknown): SnapshotAnswer {
    const found = this.entries.get(key);
    if (found?.version === version) return found.answer;
    const answer = SnapshotAnswer.of(make(), this.options);
    this.entries.set(key, { version, answer });
    return answer;
  }

  get size(): number {
    return this.entries.size;
  }
}
