/**
 * Spoken answers. An answer is split into short sentence-aligned chunks; each chunk gets an
 * unguessable clip id and URL (`/v1/guide/tts/{id}.mp3`) at once, and its audio is synthesized
 * on first request (the first chunk is started right away so playback can begin quickly). Clips
 * expire after a TTL (404 afterwards). Bounded: clip count, cached audio bytes, and concurrent
 * syntheses. With REDIS_URL, any instance serves any clip (RedisClipRegistry).
 */
import { randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Redis } from 'ioredis';
import { HttpError } from '../errors.ts';
import type { SpeechEngine } from '../upstream/tts.ts';

const CHUNK_CHARS = 220;

/**
 * Sentence-aligned chunks of at most `max` characters: whole sentences are packed together; a
 * sentence longer than `max` is cut at a clause boundary (, ; :) or a space.
 */
export function speechChunks(text: string, max = CHUNK_CHARS): string[] {
  const normalized = text.replace(/\s+/g, ' ').trim();
  // A sentence ends at . ! ? … (and closing quotes or brackets) followed by a space.
  const sentences = normalized ? normalized.split(/(?<=[.!?…]["'”’)\]]*) /u) : [];
  const pieces: string[] = [];
  for (const raw of sentences) {
    let sentence = raw.trim();
    while (sentence.length > max) {
      const window = sentence.slice(0, max);
      let cut = Math.max(window.lastIndexOf(', '), window.lastIndexOf('; '), window.lastIndexOf(': '));
      if (cut < max / 3) cut = window.lastIndexOf(' ');
      if (cut < max / 3) cut = max - 1;
      pieces.push(sentence.slice(0, cut + 1).trim());
      sentence = sentence.slice(cut + 1).trim();
    }
    if (sentence) pieces.push(sentence);
  }
  const chunks: string[] = [];
  for (const piece of pieces) {
    const last = chunks[chunks.length - 1];
    if (last !== undefined && last.length + 1 + piece.length <= max) chunks[chunks.length - 1] = `${last} ${piece}`;
    else chunks.push(piece);
  }
  return chunks;
}

interface Clip {
  text: string;
  voice?: string;
  /** The synthesis in flight, shared by the requests that wait for it. */
  synthesis?: Promise<Buffer>;
}

/**
 * Where other instances find the clips this one registered (REDIS_URL): a visitor's player may
 * fetch a clip URL from any instance behind the load balancer. Only the text and voice are
 * shared; each instance synthesizes and caches the audio it serves.
 */
interface ClipRegistry {
  put(id: string, clip: { text: string; voice?: string }, ttlMs: number): void;
  /** The clip and its remaining lifetime; null when unknown, expired or unreachable. */
  get(id: string): Promise<{ text: string; voice?: string; ttlMs: number } | null>;
}

export interface SpeechOptions {
  engine: SpeechEngine;
  publicUrl: string;
  ttlMs: number;
  shared?: ClipRegistry;
  maxClips?: number;
  maxAudioBytes?: number;
  concurrency?: number;
  /** Syntheses waiting for a slot at most; one more is refused (503 BUSY) rather than queued behind them. */
  maxWaiting?: number;
  now?: () => number;
}

/** The defaults of the speech queue's options, exported beside them as glTF-Transform's functions do. @public */
export const SPEECH_DEFAULTS = { concurrency: 2, maxWaiting: 32 } as const;

/** Synthesis is backed up: the visitor's player retries shortly instead of waiting behind a flood of clips. */
const speechBusy = () => new HttpError(503, 'BUSY', 'Speech synthesis is busy; try again shortly', { 'Retry-After': '5' });

export const CLIP_ID = /^[A-Za-z0-9_-]{22}$/;

export class SpeechClips {
  /** Registered clips, bounded by count (least recently used out first) and by their lifetime; a clip's audio goes with it. */
  private readonly clips: LRUCache<string, Clip>;
  /** Synthesized audio by clip id, bounded by bytes, least recently served out first (its clip's text stays). */
  private readonly audioCache: LRUCache<string, Buffer>;
  private running = 0;
  private readonly waiting: Array<() => void> = [];
  private readonly concurrency: number;
  private readonly maxWaiting: number;
  private readonly now: () => number;
  /** When expired clips were last swept out of memory (`now()` time). */
  private sweptAt = -Infinity;

  constructor(private readonly options: SpeechOptions) {
    this.audioCache = new LRUCache({
      maxSize: options.maxAudioBytes ?? 64 * 1024 * 1024,
      sizeCalculation: (audio) => Math.max(1, audio.length),
    });
    this.clips = new LRUCache({
      max: options.maxClips ?? 20_000,
      ttl: options.ttlMs,
      // The clock read at every check, not cached for a millisecond: tests move `now` by hand.
      ttlResolution: 0,
      ...(options.now ? { perf: { now: options.now } } : {}),
      dispose: (_clip, id, reason) => {
        if (reason !== 'set') this.audioCache.delete(id);
      },
    });
    this.concurrency = options.concurrency ?? SPEECH_DEFAULTS.concurrency;
    this.maxWaiting = options.maxWaiting ?? SPEECH_DEFAULTS.maxWaiting;
    this.now = options.now ?? Date.now;
  }

  /** Register the chunks of an answer; returns their URLs in order. */
  prepare(text: string, voice?: string): string[] {
    const urls: string[] = [];
    this.sweep();
    for (const chunk of speechChunks(text)) {
      const id = randomBytes(16).toString('base64url');
      const clip: Clip = { text: chunk, voice };
      this.clips.set(id, clip);
      this.options.shared?.put(id, { text: chunk, voice }, this.options.ttlMs);
      urls.push(`${this.options.publicUrl}/v1/guide/tts/${id}.mp3`);
      // Start the first chunk now so playback can begin sooner (unless synthesis is backed up).
      if (urls.length === 1 && this.waiting.length < 8) this.audioOf(id, clip).catch(() => undefined);
    }
    return urls;
  }

  /** mp3 of a clip; null when unknown or expired. Engine failures reject (an UpstreamError); a full queue rejects 503 BUSY. */
  async audio(id: string): Promise<Buffer | null> {
    // `get` drops an expired clip (and its audio); another instance's registry has it expired too.
    const clip = this.clips.get(id) ?? (await this.adopt(id));
    if (!clip) return null;
    return this.audioOf(id, clip);
  }

  get size(): number {
    return this.clips.size;
  }

  /** A clip another instance registered, taken in with the lifetime it has left. */
  private async adopt(id: string): Promise<Clip | undefined> {
    const found = await this.options.shared?.get(id);
    if (!found || found.ttlMs <= 0) return undefined;
    const existing = this.clips.peek(id); // adopted meanwhile by a concurrent request
    if (existing) return existing;
    const clip: Clip = { text: found.text, voice: found.voice };
    this.clips.set(id, clip, { ttl: found.ttlMs });
    return clip;
  }

  private audioOf(id: string, clip: Clip): Promise<Buffer> {
    const cached = this.audioCache.get(id);
    if (cached) return Promise.resolve(cached);
    if (!clip.synthesis) {
      // A clip already being synthesized is shared above; only a new synthesis needs a place in the queue.
      if (this.running >= this.concurrency && this.waiting.length >= this.maxWaiting) return Promise.reject(speechBusy());
      const synthesis = this.limited(() => this.options.engine.synthesize(clip.text, { voice: clip.voice }));
      clip.synthesis = synthesis;
      synthesis
        .then(
          (audio) => {
            if (this.clips.peek(id) === clip) this.audioCache.set(id, audio);
          },
          () => undefined, // a failed synthesis is retried on the next request
        )
        .finally(() => {
          if (clip.synthesis === synthesis) clip.synthesis = undefined;
        });
    }
    return clip.synthesis;
  }

  /** Expired clips (and their audio) leave memory at most a minute late, not only when asked for or pushed out. */
  private sweep(): void {
    if (this.now() - this.sweptAt < 60_000) return;
    this.sweptAt = this.now();
    this.clips.purgeStale();
  }

  private async limited<T>(task: () => Promise<T>): Promise<T> {
    // A finishing task hands its slot straight to the next waiter.
    if (this.running >= this.concurrency) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.running++;
    try {
      return await task();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}

/** The clip registry in Redis: one key per clip, expiring with it. Failures mean "not found". */
export class RedisClipRegistry implements ClipRegistry {
  constructor(
    private readonly redis: Redis,
    private readonly prefix = 'museum:clip:',
  ) {}

  put(id: string, clip: { text: string; voice?: string }, ttlMs: number): void {
    this.redis.set(this.prefix + id, JSON.stringify(clip), 'PX', ttlMs).catch(() => undefined);
  }

  async get(id: string): Promise<{ text: string; voice?: string; ttlMs: number } | null> {
    try {
      const [[, value], [, ttl]] = (await this.redis
        .multi()
        .get(this.prefix + id)
        .pttl(this.prefix + id)
        .exec())! as [[null, string | null], [null, number]];
      if (value === null || ttl <= 0) return null;
      const clip = JSON.parse(value) as { text: string; voice?: string };
      return typeof clip.text === 'string' ? { text: clip.text, voice: clip.voice, ttlMs: ttl } : null;
    } catch {
      return null;
    }
  }
}
