/**
 * The Library: a Cortex-style retrieval Q&A service (decisions: upstream services).
 *   POST /api/ask          → { question?, answer, sources, graph_context? }
 *   POST /api/ask/stream   → SSE `data: {json}` frames, `: ping` comments, `{done:true}` possibly
 *                            followed by `memory_update` (the conversation memory a client keeps
 *                            for its next question) and, on rolling restarts, `event: shutdown`
 *   POST /api/search       → { query?, results, total_results }
 *   GET  /api/collections  → [collection] or { collections: [collection] }
 * Auth: `X-API-Key`. The request bodies use the API's own field names.
 */
import type { Logger } from 'pino';
import { z } from 'zod';
import { deadline, formatSse, type SseStream, UpstreamError, UpstreamHttp } from './http.ts';

export const LIBRARY_SERVICE = 'Library';
/** Longest answer frame we take (characters): a `sources` frame of 20 excerpts is a few tens of KB. */
export const LIBRARY_MAX_FRAME_CHARS = 2 * 1024 * 1024;
/** Largest whole answer stream (bytes): past it the answer fails with 502 (or the stream ends). */
export const LIBRARY_MAX_ANSWER_BYTES = 16 * 1024 * 1024;
/** Spec: the last 20 turns of conversation_history are kept. */
const HISTORY_TURNS = 20;

// ---------------------------------------------------------------------------------------------
// Request bodies (spec table) — shared by the routes and by other callers (the guide)

const nonEmpty = (what: string) => z.string().trim().min(1, `${what} must not be empty`);

export const LibraryAskRequest = z
  .object({
    question: nonEmpty('question').max(8_000),
    collection_id: z.string().min(1).max(200).optional().describe('scope to one Library collection'),
    top_k: z.number().int().min(1).max(20).default(5),
    use_graph: z.boolean().default(true).describe('include knowledge-graph context'),
    use_agentic: z.boolean().default(false).describe('deep-research mode, multi-step, slower'),
    conversation_history: z
      .array(z.object({ role: z.enum(['user', 'assistant']), content: z.string() }))
      .optional()
      .transform((h) => h?.slice(-HISTORY_TURNS))
      .describe(`earlier turns; only the last ${HISTORY_TURNS} are kept`),
  })
  .meta({ id: 'LibraryAskRequest' });
export type LibraryAskRequest = z.output<typeof LibraryAskRequest>;

export const LibrarySearchRequest = z
  .object({
    query: nonEmpty('query').max(8_000),
    top_k: z.number().int().min(1).max(25).default(5),
    collection_id: z.string().min(1).max(200).optional(),
  })
  .meta({ id: 'LibrarySearchRequest' });
export type LibrarySearchRequest = z.output<typeof LibrarySearchRequest>;

// ---------------------------------------------------------------------------------------------
// Public shapes (spec)

const LibrarySource = z
  .object({
    document_id: z.union([z.string(), z.number()]),
    content: z.string().describe('excerpt text'),
    score: z.number(),
    metadata: z.record(z.string(), z.unknown()).describe('carries filename'),
  })
  .meta({ id: 'LibrarySource' });
type LibrarySource = z.infer<typeof LibrarySource>;

export const LibraryAnswer = z
  .object({
    question: z.string(),
    answer: z.string(),
    sources: z.array(LibrarySource),
    graph_context: z.record(z.string(), z.unknown()).optional().describe('entities/relationships used (use_graph)'),
  })
  .meta({ id: 'LibraryAnswer' });
export type LibraryAnswer = z.infer<typeof LibraryAnswer>;

export const LibraryCollection = z
  .object({
    id: z.string().describe('use as collection_id'),
    name: z.string(),
    description: z.string().nullable(),
    document_count: z.number().int(),
    entity_count: z.number().int(),
  })
  .meta({ id: 'LibraryCollection' });
export type LibraryCollection = z.infer<typeof LibraryCollection>;

export const LibrarySearchResult = z
  .object({ query: z.string(), results: z.array(LibrarySource), total_results: z.number().int() })
  .meta({ id: 'LibrarySearchResult' });
export type LibrarySearchResult = z.infer<typeof LibrarySearchResult>;

// ---------------------------------------------------------------------------------------------
// Upstream shapes (lenient where the Library may add fields, strict where we need values)

const UpstreamSource = z.looseObject({
  document_id: z.union([z.string(), z.number()]),
  content: z.string(),
  score: z.coerce.number(),
  metadata: z.record(z.string(), z.unknown()).nullish(),
});
const UpstreamAnswer = z.looseObject({
  question: z.string().optional(),
  answer: z.string(),
  sources: z.array(UpstreamSource).nullish(),
  graph_context: z.record(z.string(), z.unknown()).nullish(),
});
const UpstreamSearch = z.looseObject({
  query: z.string().optional(),
  results: z.array(UpstreamSource),
  total_results: z.coerce.number().int().optional(),
});
const UpstreamCollection = z.looseObject({
  id: z.union([z.string(), z.number()]),
  name: z.string(),
  description: z.string().nullish(),
  document_count: z.coerce.number().int().nullish(),
  entity_count: z.coerce.number().int().nullish(),
});
const UpstreamCollections = z.union([z.array(UpstreamCollection), z.looseObject({ collections: z.array(UpstreamCollection) })]);

const toSource = (s: z.infer<typeof UpstreamSource>): LibrarySource => ({
  document_id: s.document_id,
  content: s.content,
  score: s.score,
  metadata: s.metadata ?? {},
});

// ---------------------------------------------------------------------------------------------
// The client

export interface LibraryClientOptions {
  url: string;
  key?: string;
  /** Deadline of a request/response call, and of the response head of a stream. */
  timeoutMs: number;
  /** A stream silent (no frame, no heartbeat) for this long is ended. */
  streamIdleMs: number;
  log?: Logger;
  /** Bounds of an answer stream (defaults LIBRARY_MAX_FRAME_CHARS, LIBRARY_MAX_ANSWER_BYTES). */
  maxFrameChars?: number;
  maxAnswerBytes?: number;
}

export interface LibraryCall {
  signal?: AbortSignal;
}

/**
 * Frames of an answer as SSE text, as they arrive, until the upstream closes (`memory_update` and
 * `event: shutdown` after `done` included); `close()` cancels the upstream request.
 */
export interface LibraryStream extends AsyncIterable<string> {
  close(): void;
}

export class LibraryClient {
  private readonly http: UpstreamHttp;

  constructor(private readonly options: LibraryClientOptions) {
    this.http = new UpstreamHttp({
      service: LIBRARY_SERVICE,
      baseUrl: options.url,
      timeoutMs: options.timeoutMs,
      headers: options.key ? { 'x-api-key': options.key } : {},
      log: options.log,
    });
  }

  /** How long a stream may make no progress (the upstream silent, or our client not reading) before it is ended. */
  get streamIdleMs(): number {
    return this.options.streamIdleMs;
  }

  /** Ask a question. Agentic asks go over the upstream stream (the Library's deep mode streams only). */
  async ask(request: LibraryAskRequest, call: LibraryCall = {}): Promise<LibraryAnswer> {
    if (request.use_agentic) return this.collect(request, call);
    const result = await this.http.json('/api/ask', { method: 'POST', body: request, signal: call.signal });
    const parsed = UpstreamAnswer.safeParse(result.body);
    if (!parsed.success) throw this.garbage('/api/ask');
    const a = parsed.data;
    return {
      question: a.question ?? request.question,
      answer: a.answer,
      sources: (a.sources ?? []).map(toSource),
      ...(a.graph_context ? { graph_context: a.graph_context } : {}),
    };
  }

  /**
   * Open an answer stream to relay. Resolves once the upstream accepted the request (failures before that
   * throw `UpstreamError`); iterate for its SSE frames (`data: …`, `event: …` and `: ping`
   * comments), every one until the upstream closes — `{done:true}` is not the end: `memory_update`
   * and `event: shutdown` may follow — within the idle timeout; `close()` (or the caller's signal)
   * cancels the upstream request.
   */
  async askStream(request: LibraryAskRequest, call: LibraryCall = {}): Promise<LibraryStream> {
    const stream = await this.openAnswer(request, call);
    return {
      async *[Symbol.asyncIterator]() {
        for await (const item of stream) yield formatSse(item);
      },
      close: () => stream.close(),
    };
  }

  /** The upstream answer stream, parsed (events and comments). */
  private openAnswer(request: LibraryAskRequest, call: LibraryCall): Promise<SseStream> {
    return this.http.stream('/api/ask/stream', {
      method: 'POST',
      body: request,
      signal: call.signal,
      idleMs: this.options.streamIdleMs,
      maxFrameChars: this.options.maxFrameChars ?? LIBRARY_MAX_FRAME_CHARS,
      maxTotalBytes: this.options.maxAnswerBytes ?? LIBRARY_MAX_ANSWER_BYTES,
    });
  }

  async search(request: LibrarySearchRequest, call: LibraryCall = {}): Promise<LibrarySearchResult> {
    const result = await this.http.json('/api/search', { method: 'POST', body: request, signal: call.signal });
    const parsed = UpstreamSearch.safeParse(result.body);
    if (!parsed.success) throw this.garbage('/api/search');
    const results = parsed.data.results.map(toSource);
    return { query: parsed.data.query ?? request.query, results, total_results: parsed.data.total_results ?? results.length };
  }

  async collections(call: LibraryCall = {}): Promise<LibraryCollection[]> {
    const result = await this.http.json('/api/collections', { signal: call.signal });
    const parsed = UpstreamCollections.safeParse(result.body);
    if (!parsed.success) throw this.garbage('/api/collections');
    const list = Array.isArray(parsed.data) ? parsed.data : parsed.data.collections;
    return list.map((c) => ({
      id: String(c.id),
      name: c.name,
      description: c.description ?? null,
      document_count: c.document_count ?? 0,
      entity_count: c.entity_count ?? 0,
    }));
  }

  private garbage(path: string): UpstreamError {
    return this.http.failure('body', `${path}: unexpected response shape`);
  }

  /**
   * Read an answer stream into a LibraryAnswer, up to `{done:true}` (what follows is for streaming
   * clients), within the request/response deadline and the stream's size bounds.
   */
  private async collect(request: LibraryAskRequest, call: LibraryCall): Promise<LibraryAnswer> {
    const timeoutMs = this.options.timeoutMs;
    const { signal, cancel, timedOut } = deadline(timeoutMs, call.signal);
    const tooSlow = () => this.http.failure('timeout', `/api/ask/stream: no complete answer within ${timeoutMs} ms`);
    const answer: LibraryAnswer = { question: request.question, answer: '', sources: [] };
    let done = false;
    try {
      const stream = await this.openAnswer(request, { signal });
      try {
        for await (const { message } of stream) {
          const event = message && parseJson(message.data);
          if (typeof event !== 'object' || event === null) continue;
          const e = event as Record<string, unknown>;
          if (typeof e.content === 'string') answer.answer += e.content;
          if (Array.isArray(e.sources)) {
            const sources = z.array(UpstreamSource).safeParse(e.sources);
            if (!sources.success) throw this.garbage('/api/ask/stream');
            answer.sources = sources.data.map(toSource);
          }
          if (typeof e.graph_context === 'object' && e.graph_context !== null)
            answer.graph_context = e.graph_context as Record<string, unknown>;
          if (isDone(e)) {
            done = true;
            break;
          }
        }
      } finally {
        stream.close();
      }
    } catch (err) {
      if (timedOut()) throw tooSlow();
      throw err;
    } finally {
      cancel();
    }
    if (done) return answer;
    if (timedOut()) throw tooSlow();
    if (call.signal?.aborted) throw new UpstreamError(LIBRARY_SERVICE, 'aborted', '/api/ask/stream: cancelled by the caller');
    throw this.http.failure('body', '/api/ask/stream: the stream ended before done');
  }
}

/** An event's data as JSON, or undefined when it is something else. */
function parseJson(data: string): unknown {
  try {
    return JSON.parse(data);
  } catch {
    return undefined;
  }
}

const isDone = (event: unknown): boolean => typeof event === 'object' && event !== null && (event as { done?: unknown }).done === true;
