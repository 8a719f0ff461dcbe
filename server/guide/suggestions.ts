/**
 * Visitor question suggestions and exhibition starters.
 *  - Suggestions are drawn from the exhibition's artworks, artists, rooms, architects and
 *    starters by a PRNG seeded from (exhibition, seed): the same seed gives the same questions.
 *  - Starters are generated after registration, off the request path: by the language model
 *    when one is configured (and answers usefully), else from templates over the context.
 */
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import { seededRandom } from '../../common/random.ts';
import type { LlmClient } from '../upstream/llm.ts';
import type { ExhibitionStore } from '../state/exhibitions.ts';
import type { GuideContext } from './exhibitions.ts';
import { cleanText } from './text.ts';

const MAX_STARTERS = 6;
const QUESTION_CHARS = 160;

type Category = 'starter' | 'artwork' | 'artist' | 'room' | 'architect';

/** A category of questions, generated on demand (an exhibition may hold 15,000 artworks). */
interface Source {
  size: number;
  at(i: number): string;
}

function sources(context: GuideContext, prefer?: { artworks?: Set<number>; rooms?: Set<string> }): Map<Category, Source> {
  const artworks = prefer?.artworks?.size ? [...prefer.artworks] : context.artworks.map((_, i) => i);
  const rooms = prefer?.rooms?.size ? context.rooms.filter((r) => prefer.rooms!.has(r.uid)) : context.rooms;
  const all = new Map<Category, Source>([
    ['starter', { size: context.starters.length, at: (i) => context.starters[i]! }],
    [
      'artwork',
      {
        size: artworks.length * 2,
        at: (i) => {
          const a = context.artworks[artworks[i >> 1]!]!;
          return i % 2 && a.artist ? `Why did ${a.artist} make "${a.title}"?` : `What is the story behind "${a.title}"?`;
        },
      },
    ],
    ['artist', { size: context.artists.length, at: (i) => `Who is ${context.artists[i]}?` }],
    ['room', { size: rooms.length, at: (i) => `What should I look at in ${rooms[i]!.title}?` }],
    ['architect', { size: context.architects.length, at: (i) => `What was ${context.architects[i]} aiming for with this space?` }],
  ]);
  for (const [category, source] of all) if (source.size === 0) all.delete(category);
  return all;
}

/**
 * `count` distinct questions for `seed`. Categories are visited in a seeded order, round-robin,
 * so a handful of suggestions mixes artworks, people and places. `prefer` narrows artworks (by
 * index) and rooms (by uid) to what the visitor is looking at.
 */
export function suggest(
  context: GuideContext,
  seed: string,
  count = 3,
  prefer?: { artworks?: Set<number>; rooms?: Set<string> },
): string[] {
  const random = seededRandom(`${context.id}\n${seed}`);
  const pool = sources(context, prefer);
  const order = [...pool.keys()].sort();
  // Seeded shuffle of the categories (Fisher-Yates).
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const picked: string[] = [];
  for (let round = 0; picked.length < count && round < count * 4; round++) {
    for (const category of order) {
      if (picked.length >= count) break;
      const source = pool.get(category)!;
      // A few seeded draws to find one not taken yet.
      for (let attempt = 0; attempt < 6; attempt++) {
        const question = cleanText(source.at(Math.floor(random() * source.size)), QUESTION_CHARS);
        if (!picked.includes(question)) {
          picked.push(question);
          break;
        }
      }
    }
  }
  return picked;
}

/** Starters from templates: deterministic for the exhibition's content. */
export function templateStarters(context: GuideContext): string[] {
  const starters = [`What ties the works in ${context.name} together?`, `Where should I begin in ${context.name}?`];
  const room = context.rooms.find((r) => r.architect);
  if (room) starters.push(`How did ${room.architect} shape ${room.title}?`);
  const artwork = context.artworks[0];
  if (artwork) starters.push(`What should I notice in "${artwork.title}"?`);
  const artist = context.artists[0];
  if (artist) starters.push(`What else should I know about ${artist}?`);
  if (context.rooms.length >= 2) starters.push(`How do ${context.rooms[0]!.title} and ${context.rooms[1]!.title} differ?`);
  return starters.map((s) => cleanText(s, QUESTION_CHARS)).slice(0, MAX_STARTERS);
}

/** Questions from a model's reply: one per line, bullets and numbering removed, questions only. */
function parseStarters(reply: string): string[] {
  const questions = reply
    .split('\n')
    .map((line) => cleanText(line.replace(/^\s*(?:[-*•]|\d+[.)])\s*/, '').replace(/^["']|["']$/g, ''), QUESTION_CHARS))
    .filter((line) => line.length >= 8 && line.endsWith('?') && !/[<>]/.test(line));
  return [...new Set(questions)].slice(0, MAX_STARTERS);
}

/**
 * A compact description of the exhibition for prompts, bounded to `maxChars`. The rooms and
 * artworks in `first` (what the visitor asked about or stands in) come first, so they survive
 * the bound in large exhibitions.
 */
export function describeForPrompt(context: GuideContext, maxChars = 4_000, first: { artworks?: number[]; rooms?: string[] } = {}): string {
  const roomLine = (r: GuideContext['rooms'][number]) =>
    `Room "${r.title}"${r.architect ? ` designed by ${r.architect}` : ''}${r.series ? ` (series ${r.series})` : ''}` +
    `${r.description ? `: ${r.description}` : ''}`;
  const titles = new Map(context.rooms.map((r) => [r.uid, r.title]));
  const artworkLine = (a: GuideContext['artworks'][number]) =>
    `Artwork "${a.title}"${a.artist ? ` by ${a.artist}` : ''}${a.collection ? ` (${a.collection})` : ''}` +
    `, in ${titles.get(a.roomUid) ?? 'the exhibition'}${a.description ? `: ${a.description}` : ''}`;
  const firstRooms = new Set(first.rooms ?? []);
  const firstArtworks = new Set(first.artworks ?? []);
  // Lazily, so a 15,000-artwork exhibition only formats what fits.
  function* lines(): Generator<string> {
    const { rooms, artworks, artists } = context;
    yield `Exhibition "${context.name}": ${rooms.length} rooms, ${artworks.length} artworks, ${artists.length} artists.`;
    for (const i of firstArtworks) if (context.artworks[i]) yield artworkLine(context.artworks[i]);
    for (const r of context.rooms) if (firstRooms.has(r.uid)) yield roomLine(r);
    for (const r of context.rooms) if (!firstRooms.has(r.uid)) yield roomLine(r);
    for (let i = 0; i < context.artworks.length; i++) if (!firstArtworks.has(i)) yield artworkLine(context.artworks[i]!);
  }
  let out = '';
  for (const line of lines()) {
    if (out.length + line.length + 1 > maxChars) break;
    out += `${line}\n`;
  }
  return out.trimEnd();
}

/**
 * Starter generation jobs, run after the registration response. One job per exhibition at a
 * time (a newer registration supersedes a queued one), a bounded queue, and cancellation on
 * shutdown so nothing writes to a closed database.
 */
export class StarterJobs {
  /**
   * Queued jobs, exhibition id → content hash. Never read with `get`, so an LRU cache of
   * `maxQueued` is a bounded queue (the least recently set first): a newer registration of a queued id replaces it at the back, and
   * beyond the bound the oldest job gives way (that exhibition has no starters; suggestions still
   * draw on its content).
   */
  private readonly queue: LRUCache<string, string>;
  private running = 0;
  private readonly abort = new AbortController();
  private idleWaiters: Array<() => void> = [];

  constructor(
    private readonly deps: { store: ExhibitionStore; llm: LlmClient | null; log: Logger },
    private readonly options: { concurrency?: number; maxQueued?: number } = {},
  ) {
    this.queue = new LRUCache({
      max: options.maxQueued ?? 500,
      dispose: (_hash, id, reason) => {
        if (reason === 'evict') deps.log.warn({ exhibition: id }, 'starter generation skipped: too many exhibitions queued');
      },
    });
  }

  schedule(id: string, contentHash: string): void {
    if (this.abort.signal.aborted) return;
    this.queue.set(id, contentHash);
    this.pump();
  }

  /** Resolves when no job is queued or running (tests, shutdown). */
  idle(): Promise<void> {
    if (this.running === 0 && this.queue.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  close(): Promise<void> {
    this.queue.clear();
    this.abort.abort();
    return this.idle();
  }

  private pump(): void {
    while (this.running < (this.options.concurrency ?? 2) && this.queue.size > 0) {
      const [id, contentHash] = this.queue.rentries().next().value!;
      this.queue.delete(id);
      this.running++;
      void this.run(id, contentHash).finally(() => {
        this.running--;
        this.pump();
        if (this.running === 0 && this.queue.size === 0) {
          for (const resolve of this.idleWaiters.splice(0)) resolve();
        }
      });
    }
  }

  private async run(id: string, contentHash: string): Promise<void> {
    try {
      const current = await this.deps.store.get(id);
      if (!current || current.contentHash !== contentHash) return;
      const starters = await this.generate(current.context);
      if (this.abort.signal.aborted) return;
      await this.deps.store.setStarters(id, contentHash, starters);
    } catch (err) {
      this.deps.log.error({ err, exhibition: id }, 'starter generation failed');
    }
  }

  private async generate(context: GuideContext): Promise<string[]> {
    const { llm } = this.deps;
    if (llm) {
      try {
        const reply = await llm.chat(
          [
            {
              role: 'system',
              content:
                'You write starter questions for visitors of a museum exhibition. ' +
                `Reply with ${MAX_STARTERS} short questions, one per line, nothing else.`,
            },
            { role: 'user', content: describeForPrompt(context) },
          ],
          { signal: this.abort.signal, maxTokens: 300 },
        );
        const parsed = parseStarters(reply);
        if (parsed.length >= 3) return parsed;
      } catch {
        // Logged by the client; templates below.
      }
    }
    return templateStarters(context);
  }
}
