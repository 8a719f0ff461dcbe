/**
 * A fake Library (Cortex-style retrieval Q&A, real HTTP), speaking its contract:
 *   POST /api/ask          { question, collection_id?, top_k, use_graph, use_agentic, conversation_history? }
 *                          → { question, answer, sources, graph_context? }
 *   POST /api/ask/stream   same body → SSE: [{thinking}, {sub_questions}] (agentic), {content} chunks
 *                          with `: ping` comments between them, {sources}, {graph_context} (use_graph),
 *                          {done: true}, then {memory_update} (the conversation memory a client keeps)
 *                          — at once, or later (`answerWith({ kind: 'tail' })`, optionally with an
 *                          `event: shutdown` frame as on a rolling restart)
 * Hostile answers (`answerWith`): a flood of huge content frames, or one frame that never ends;
 * the generic faults (stall after N frames, reset, 5xx…) apply too.
 *   POST /api/search       { query, top_k, collection_id? } → { query, results, total_results }
 *   GET  /api/collections  → [{ id, name, description, document_count, entity_count }]
 * Auth: `X-API-Key` (401 otherwise). Invalid bodies: 422, as FastAPI answers.
 * Answers are deterministic: the same question gives the same frames.
 */
import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { type FakeServer, type FrameWriter, sendJson, startFakeServer } from './faults.ts';

interface LibraryDocument {
  document_id: string;
  content: string;
  metadata: { filename: string; collection_id: string };
}

export interface LibraryFakeOptions {
  /** Required X-API-Key (none = open). */
  key?: string;
  /** Delay between stream frames (default 0). */
  frameDelayMs?: number;
  /** A `: ping` comment after every this many content frames (default 3). */
  pingEvery?: number;
}

/** How `/api/ask/stream` answers (default: the deterministic frames, memory_update right after done). */
type StreamBehaviour =
  /** memory_update `delayMs` after done, then (`shutdown`) an `event: shutdown` frame, then the end. */
  | { kind: 'tail'; delayMs: number; shutdown?: boolean }
  /** Content frames of `frameChars` characters each, `frames` of them (default: until the client leaves). */
  | { kind: 'flood'; frameChars: number; frames?: number }
  /** `before` ordinary frames, then one frame of `chars` characters that never ends (sent in 64 KB pieces; the body then ends). */
  | { kind: 'unterminated'; chars: number; before?: number };

export const SHUTDOWN_FRAME = 'event: shutdown\ndata: {"reason":"restart"}\n\n';

export interface LibraryFake extends FakeServer {
  documents: LibraryDocument[];
  collections: Array<{ id: string; name: string; description: string | null; document_count: number; entity_count: number }>;
  /** Pause every stream after `frames` frames until `release()` (to observe a stream in flight). */
  hold(frames: number): void;
  release(): void;
  /** The frames a stream answer to `body` consists of, as the fake sends them by default. */
  framesFor(body: AskBody): string[];
  /** Answer streams this way from now on (null: the default). */
  answerWith(behaviour: StreamBehaviour | null): void;
}

interface AskBody {
  question: string;
  collection_id?: string;
  top_k?: number;
  use_graph?: boolean;
  use_agentic?: boolean;
  conversation_history?: Array<{ role: string; content: string }>;
}

const COLLECTIONS = [
  {
    id: 'museum-essays',
    name: 'Museum essays',
    description: 'Curatorial essays on the rooms and their architects',
    document_count: 4,
    entity_count: 31,
  },
  { id: 'artist-notes', name: 'Artist notes', description: null, document_count: 3, entity_count: 12 },
];

const DOCUMENTS: LibraryDocument[] = [
  {
    document_id: 'doc-1',
    content: 'The Atrium was drawn by Mara Okafor as a hall of light, its slots facing the courtyard.',
    metadata: { filename: 'atrium.md', collection_id: 'museum-essays' },
  },
  {
    document_id: 'doc-2',
    content: 'Sculpture rooms carry no authored slots; anchors are generated from the onchain slot count.',
    metadata: { filename: 'sculpture-rooms.md', collection_id: 'museum-essays' },
  },
  {
    document_id: 'doc-3',
    content: 'Glass Steppe artists favour surreal palettes and long shadows at dusk.',
    metadata: { filename: 'glass-steppe.md', collection_id: 'artist-notes' },
  },
  {
    document_id: 'doc-4',
    content: 'The Long Gallery hangs its works on both sides of a zero-thickness partition.',
    metadata: { filename: 'long-gallery.md', collection_id: 'museum-essays' },
  },
  {
    document_id: 'doc-5',
    content: 'Lantern Guild painters sign their works with a small ember in the corner.',
    metadata: { filename: 'lantern-guild.md', collection_id: 'artist-notes' },
  },
  {
    document_id: 'doc-6',
    content: 'Every room model keeps its original file; the optimized copy is draco-compressed.',
    metadata: { filename: 'models.md', collection_id: 'museum-essays' },
  },
  {
    document_id: 'doc-7',
    content: 'Iron Choir sculptors work in brutalist forms of bone and salt.',
    metadata: { filename: 'iron-choir.md', collection_id: 'artist-notes' },
  },
];

const words = (s: string) => s.toLowerCase().match(/[a-z0-9]+/g) ?? [];

function rank(query: string, topK: number, collectionId?: string) {
  const q = new Set(words(query));
  return DOCUMENTS.filter((d) => !collectionId || d.metadata.collection_id === collectionId)
    .map((d) => ({ ...d, score: Math.round((words(d.content).filter((w) => q.has(w)).length / Math.max(1, q.size)) * 1000) / 1000 }))
    .sort((a, b) => b.score - a.score || a.document_id.localeCompare(b.document_id))
    .slice(0, topK);
}

function answerFor(body: AskBody) {
  const sources = rank(body.question, body.top_k ?? 5, body.collection_id);
  const answer = `About "${body.question}": ${sources[0]?.content ?? 'the Library holds nothing on this.'} (${sources.length} sources consulted)`;
  const graph_context = {
    entities: sources.slice(0, 2).map((s) => ({ name: s.metadata.filename.replace(/\.md$/, ''), type: 'topic' })),
    relationships: [],
  };
  return { question: body.question, answer, sources, graph_context };
}

export async function startFakeLibrary(options: LibraryFakeOptions = {}): Promise<LibraryFake> {
  const pingEvery = options.pingEvery ?? 3;
  let holdAt = Infinity;
  let released: () => void = () => undefined;
  let gate = Promise.resolve();
  let behaviour: StreamBehaviour | null = null;

  const framesFor = (body: AskBody): string[] => {
    const a = answerFor(body);
    const frames: string[] = [];
    const data = (v: unknown) => frames.push(`data: ${JSON.stringify(v)}\n\n`);
    if (body.use_agentic) {
      data({ thinking: `Breaking "${body.question}" into parts.` });
      data({ sub_questions: [`What does the Library hold on ${words(body.question)[0] ?? 'this'}?`, 'Which rooms are involved?'] });
    }
    const chunks = a.answer.match(/\S+\s*/g) ?? [];
    chunks.forEach((chunk, i) => {
      data({ content: chunk });
      if ((i + 1) % pingEvery === 0) frames.push(': ping\n\n');
    });
    data({ sources: a.sources });
    if (body.use_graph !== false) data({ graph_context: a.graph_context });
    data({ done: true });
    data({ memory_update: { conversation_turns: (body.conversation_history?.length ?? 0) + 1 } });
    return frames;
  };

  const parseAsk = (res: ServerResponse, text: string): AskBody | null => {
    try {
      const body = JSON.parse(text) as AskBody;
      if (typeof body.question === 'string' && body.question.length > 0) return body;
    } catch {
      /* fall through */
    }
    sendJson(res, 422, { detail: [{ loc: ['body', 'question'], msg: 'field required', type: 'value_error.missing' }] });
    return null;
  };

  const fake = await startFakeServer(async (req, res, { frames }) => {
    if (options.key !== undefined && req.headers['x-api-key'] !== options.key) return sendJson(res, 401, { detail: 'Invalid API key' });
    if (req.method === 'GET' && req.path === '/api/collections') return sendJson(res, 200, COLLECTIONS);
    if (req.method === 'POST' && req.path === '/api/ask') {
      const body = parseAsk(res, req.body);
      if (!body) return;
      const a = answerFor(body);
      return sendJson(res, 200, body.use_graph === false ? { question: a.question, answer: a.answer, sources: a.sources } : a);
    }
    if (req.method === 'POST' && req.path === '/api/ask/stream') {
      const body = parseAsk(res, req.body);
      if (!body) return;
      const out = frames();
      const b = behaviour;
      if (b?.kind === 'flood' || b?.kind === 'unterminated') return hostileStream(res, out, b, framesFor(body));
      const list = framesFor(body);
      for (let i = 0; i < list.length; i++) {
        if (i === holdAt) await gate;
        if (options.frameDelayMs) await sleep(options.frameDelayMs);
        if (b?.kind === 'tail' && i === list.length - 1) await sleep(b.delayMs); // memory_update comes later
        if (!out.frame(list[i]!)) return; // client gone, or a stall/reset fault
      }
      if (b?.kind === 'tail' && b.shutdown && !out.frame(SHUTDOWN_FRAME)) return;
      out.end();
      return;
    }
    if (req.method === 'POST' && req.path === '/api/search') {
      let body: { query?: unknown; top_k?: number; collection_id?: string };
      try {
        body = JSON.parse(req.body) as typeof body;
      } catch {
        body = {};
      }
      if (typeof body.query !== 'string') return sendJson(res, 422, { detail: [{ loc: ['body', 'query'], msg: 'field required' }] });
      const results = rank(body.query, body.top_k ?? 5, body.collection_id);
      return sendJson(res, 200, { query: body.query, results, total_results: results.length });
    }
    sendJson(res, 404, { detail: 'Not Found' });
  });

  return Object.assign(fake, {
    documents: DOCUMENTS,
    collections: COLLECTIONS,
    hold(n: number) {
      holdAt = n;
      gate = new Promise<void>((resolve) => (released = resolve));
    },
    release() {
      holdAt = Infinity;
      released();
    },
    framesFor,
    answerWith(next: StreamBehaviour | null) {
      behaviour = next;
    },
  });
}

/** Write as fast as the peer reads (never buffering more than one piece); false once it is gone. */
async function send(res: ServerResponse, out: FrameWriter, text: string): Promise<boolean> {
  if (!out.frame(text)) return false;
  if (res.writableNeedDrain) {
    const settled = new AbortController();
    await Promise.race([once(res, 'drain', { signal: settled.signal }), once(res, 'close', { signal: settled.signal })]).finally(() =>
      settled.abort(),
    );
  }
  return !res.destroyed;
}

async function hostileStream(
  res: ServerResponse,
  out: FrameWriter,
  b: Extract<StreamBehaviour, { kind: 'flood' | 'unterminated' }>,
  ordinary: string[],
): Promise<void> {
  if (b.kind === 'flood') {
    const frame = `data: ${JSON.stringify({ content: 'x'.repeat(b.frameChars) })}\n\n`;
    for (let i = 0; i < (b.frames ?? Infinity); i++) if (!(await send(res, out, frame))) return;
  } else {
    for (const frame of ordinary.slice(0, b.before ?? 0)) if (!(await send(res, out, frame))) return;
    const piece = 64 * 1024;
    if (!(await send(res, out, 'data: {"content":"'))) return;
    for (let sent = 0; sent < b.chars; sent += piece) if (!(await send(res, out, 'x'.repeat(Math.min(piece, b.chars - sent))))) return;
  }
  out.end();
}
