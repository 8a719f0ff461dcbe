import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type LibraryFake, startFakeLibrary } from '../../fakes/library.ts';
import { type OpenApiDoc, validateAgainstOpenApi } from '../../helpers/openapi.ts';
import { errorOf, startTestServer, type TestServer } from '../../helpers/server.ts';

const LIBRARY_KEY = 'library-secret';
let fake: LibraryFake;
let server: TestServer;

beforeAll(async () => {
  fake = await startFakeLibrary({ key: LIBRARY_KEY });
  server = await startTestServer({
    env: { LIBRARY_UPSTREAM_URL: fake.url, LIBRARY_UPSTREAM_KEY: LIBRARY_KEY, UPSTREAM_TIMEOUT_MS: '500', LIBRARY_STREAM_IDLE_MS: '300' },
  });
});
afterAll(async () => {
  await server?.close();
  await fake?.close();
});
afterEach(() => {
  fake.clearFaults();
  fake.release();
});

const lastBody = (path: string) => JSON.parse(fake.requestsTo(path).at(-1)!.body) as Record<string, unknown>;

/** A streaming POST read frame by frame, as a browser would. */
async function openStream(body: unknown) {
  const controller = new AbortController();
  const res = await fetch(`${server.url}/v1/library/ask/stream`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': server.key },
    body: JSON.stringify(body),
    signal: controller.signal,
  });
  const frames: string[] = [];
  let buffer = '';
  let ended = false;
  const reader = res.ok ? res.body!.getReader() : null;
  const decoder = new TextDecoder();
  /** Read until `n` frames arrived or the stream ended; throws if it broke instead of ending. */
  const readFrames = async (n = Infinity): Promise<string[]> => {
    while (frames.length < n && !ended) {
      const { done, value } = await reader!.read();
      if (done) {
        ended = true;
        break;
      }
      buffer += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) !== -1) {
        frames.push(buffer.slice(0, cut + 2));
        buffer = buffer.slice(cut + 2);
      }
    }
    return frames;
  };
  return {
    res,
    frames,
    readFrames,
    abort: () => controller.abort(),
    get ended() {
      return ended;
    },
    get rest() {
      return buffer;
    },
  };
}

const ask = { question: 'Who drew the Atrium?' };
/** Every frame the Library sends, memory_update after done included. */
const expectedFrames = (body: Record<string, unknown>) => fake.framesFor(body as { question: string });

describe('validation and bounds', () => {
  it.each([
    ['no question', {}, 'question'],
    ['an empty question', { question: '  ' }, 'question'],
    ['top_k 0', { question: 'q', top_k: 0 }, 'top_k'],
    ['top_k 21', { question: 'q', top_k: 21 }, 'top_k'],
    ['a fractional top_k', { question: 'q', top_k: 2.5 }, 'top_k'],
    ['use_graph as a string', { question: 'q', use_graph: 'yes' }, 'use_graph'],
    ['an unknown history role', { question: 'q', conversation_history: [{ role: 'system', content: 'x' }] }, 'conversation_history'],
  ])('rejects %s with 400 naming the field, on ask and ask/stream', async (_name, body, field) => {
    for (const path of ['/v1/library/ask', '/v1/library/ask/stream']) {
      const error = await errorOf(await server.post(path, body));
      expect(error).toMatchObject({ status: 400, code: 'BAD_REQUEST' });
      expect(error.message).toContain(field);
    }
  });

  it('rejects bad search bodies (top_k up to 25 is fine there)', async () => {
    expect((await errorOf(await server.post('/v1/library/search', { top_k: 3 }))).message).toContain('query');
    expect((await errorOf(await server.post('/v1/library/search', { query: 'q', top_k: 26 }))).message).toContain('top_k');
    expect((await server.post('/v1/library/search', { query: 'light', top_k: 25 })).status).toBe(200);
  });

  it('forwards the defaults and keeps only the last 20 turns of conversation history', async () => {
    const history = Array.from({ length: 30 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `turn ${i}` }));
    expect((await server.post('/v1/library/ask', { question: 'What about the slots?', conversation_history: history })).status).toBe(200);
    const sent = lastBody('/api/ask');
    expect(sent).toMatchObject({ question: 'What about the slots?', top_k: 5, use_graph: true, use_agentic: false });
    expect(sent.conversation_history).toEqual(history.slice(10));
    expect(fake.requestsTo('/api/ask').at(-1)!.headers['x-api-key']).toBe(LIBRARY_KEY);
  });
});

describe('answers, search and collections', () => {
  it('answers with a LibraryAnswer', async () => {
    const res = await server.post('/v1/library/ask', { ...ask, top_k: 2 });
    expect(res.status).toBe(200);
    const { data } = (await res.json()) as {
      data: { question: string; answer: string; sources: Array<Record<string, unknown>>; graph_context?: unknown };
    };
    expect(data.question).toBe(ask.question);
    expect(data.answer).toContain('Mara Okafor');
    expect(data.sources).toHaveLength(2);
    expect(data.sources[0]).toEqual({
      document_id: 'doc-1',
      content: fake.documents[0]!.content,
      score: expect.any(Number),
      metadata: { filename: 'atrium.md', collection_id: 'museum-essays' },
    });
    expect(data.graph_context).toMatchObject({ entities: expect.any(Array) });
  });

  it('collects the upstream stream for use_agentic asks', async () => {
    const body = { ...ask, use_agentic: true };
    const before = fake.requestsTo('/api/ask').length;
    const res = await server.post('/v1/library/ask', body);
    expect(res.status).toBe(200);
    const { data } = (await res.json()) as { data: { answer: string; sources: unknown[] } };
    const direct = (await (await server.post('/v1/library/ask', ask)).json()) as { data: { answer: string; sources: unknown[] } };
    expect(data.answer).toBe(direct.data.answer);
    expect(data.sources).toEqual(direct.data.sources);
    expect(fake.requestsTo('/api/ask').length).toBe(before + 1); // only the non-agentic one
    expect(lastBody('/api/ask/stream')).toMatchObject({ use_agentic: true });
  });

  it('answers 502 when an agentic stream breaks before done', async () => {
    fake.fault('/api/ask/stream', { kind: 'reset', afterFrames: 4 });
    expect(await errorOf(await server.post('/v1/library/ask', { ...ask, use_agentic: true }))).toMatchObject({
      status: 502,
      code: 'UPSTREAM',
    });
  });

  it('searches and lists collections', async () => {
    const search = (await (
      await server.post('/v1/library/search', { query: 'sculpture slots', top_k: 3, collection_id: 'museum-essays' })
    ).json()) as {
      data: { query: string; results: Array<{ document_id: string; metadata: { collection_id: string } }>; total_results: number };
    };
    expect(search.data.query).toBe('sculpture slots');
    expect(search.data.total_results).toBe(3);
    expect(search.data.results[0]!.document_id).toBe('doc-2');
    expect(search.data.results.every((r) => r.metadata.collection_id === 'museum-essays')).toBe(true);

    const collections = (await (await server.get('/v1/library/collections')).json()) as { data: unknown[] };
    expect(collections.data).toEqual(fake.collections);
  });

  it.each([
    ['a 5xx', { kind: 'status', status: 500 } as const],
    ['a garbage body', { kind: 'garbage' } as const],
    ['a reset', { kind: 'reset' } as const],
    ['a timeout', { kind: 'timeout' } as const],
  ])('answers 502 UPSTREAM on %s', async (_name, fault) => {
    fake.fault(/^\/api\//, fault);
    for (const res of [
      await server.post('/v1/library/ask', ask),
      await server.post('/v1/library/search', { query: 'light' }),
      await server.get('/v1/library/collections'),
    ]) {
      expect(await errorOf(res)).toEqual({ status: 502, code: 'UPSTREAM', message: 'The Library is temporarily unavailable' });
    }
  });

  it('answers 503 UNCONFIGURED without a Library', async () => {
    const bare = await startTestServer();
    try {
      for (const res of [
        await bare.post('/v1/library/ask', ask),
        await bare.post('/v1/library/ask/stream', ask),
        await bare.post('/v1/library/search', { query: 'x' }),
        await bare.get('/v1/library/collections'),
      ]) {
        expect(await errorOf(res)).toMatchObject({ status: 503, code: 'UNCONFIGURED' });
      }
    } finally {
      await bare.close();
    }
  });
});

describe('POST /v1/library/ask/stream', () => {
  it('passes every frame through unchanged, heartbeats and memory_update after done included, until the upstream closes', async () => {
    const body = { ...ask, use_agentic: true, top_k: 3 };
    const stream = await openStream(body);
    expect(stream.res.status).toBe(200);
    expect(stream.res.headers.get('content-type')).toBe('text/event-stream');
    expect(stream.res.headers.get('cache-control')).toBe('no-cache, no-transform');
    expect(stream.res.headers.get('x-accel-buffering')).toBe('no');
    expect(stream.res.headers.get('x-request-id')).toBeTruthy();
    const frames = await stream.readFrames();
    expect(stream.ended).toBe(true);
    expect(frames).toEqual(expectedFrames({ ...body, use_graph: true }));
    expect(frames.filter((f) => f === ': ping\n\n').length).toBeGreaterThan(0);
    expect(frames.some((f) => f.includes('"thinking"'))).toBe(true);
    expect(frames.at(-2)).toBe('data: {"done":true}\n\n');
    expect(frames.at(-1)).toMatch(/^data: \{"memory_update":/);
    expect(stream.rest).toBe('');
  });

  it('delivers the first frames while the upstream is still answering', async () => {
    fake.hold(3);
    const stream = await openStream(ask);
    const first = await stream.readFrames(3);
    expect(first).toEqual(expectedFrames({ ...ask, use_graph: true, top_k: 5, use_agentic: false }).slice(0, 3));
    const upstream = fake.requestsTo('/api/ask/stream').at(-1)!;
    expect(upstream.finished).toBe(false); // the upstream has not finished its answer
    fake.release();
    const all = await stream.readFrames();
    expect(stream.ended).toBe(true);
    expect(all).toEqual(expectedFrames({ ...ask, use_graph: true, top_k: 5, use_agentic: false }));
  });

  it('cancels the upstream request when the client disconnects', async () => {
    fake.hold(2);
    const stream = await openStream({ question: 'Tell me about the Long Gallery' });
    await stream.readFrames(1);
    const upstream = fake.requestsTo('/api/ask/stream').at(-1)!;
    expect(upstream.cancelled).toBe(false);
    stream.abort();
    await fake.waitFor((r) => r === upstream && r.cancelled);
    expect(upstream.finished).toBe(false);
  });

  it.each([
    ['a 5xx', { kind: 'status', status: 503 } as const],
    ['a reset', { kind: 'reset' } as const],
    ['no answer', { kind: 'timeout' } as const],
    ['a body that is not an event stream', { kind: 'garbage' } as const],
    ['a stream that stalls before its first frame', { kind: 'stall', afterFrames: 0 } as const],
  ])('answers a 502 envelope on %s before the first frame', async (_name, fault) => {
    fake.fault('/api/ask/stream', fault);
    const res = await server.post('/v1/library/ask/stream', ask);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await errorOf(res)).toEqual({ status: 502, code: 'UPSTREAM', message: 'The Library is temporarily unavailable' });
  });

  it.each([
    ['stalls', { kind: 'stall', afterFrames: 2 } as const],
    ['resets the connection', { kind: 'reset', afterFrames: 2 } as const],
  ])('ends cleanly after the first frames when the upstream %s mid-answer', async (_name, fault) => {
    fake.fault('/api/ask/stream', fault);
    const stream = await openStream(ask);
    expect(stream.res.status).toBe(200);
    const frames = await stream.readFrames(); // resolves on a clean end, throws on a broken one
    expect(stream.ended).toBe(true);
    expect(frames).toEqual(expectedFrames({ ...ask, use_graph: true, top_k: 5, use_agentic: false }).slice(0, 2));
    expect(stream.rest).toBe('');
  });
});

describe('OpenAPI', () => {
  it('documents every answer of the Library routes', async () => {
    const doc = (await (await server.get('/v1/openapi.json')).json()) as OpenApiDoc;
    const check = async (method: 'GET' | 'POST', path: string, res: Response) => {
      const type = res.headers.get('content-type') ?? '';
      validateAgainstOpenApi(doc, method, path, res.status, type.startsWith('application/json') ? await res.json() : await res.text());
    };
    await check('POST', '/v1/library/ask', await server.post('/v1/library/ask', ask));
    await check('POST', '/v1/library/ask', await server.post('/v1/library/ask', { ...ask, use_graph: false }));
    await check('POST', '/v1/library/ask', await server.post('/v1/library/ask', { ...ask, use_agentic: true }));
    await check('POST', '/v1/library/ask', await server.post('/v1/library/ask', { top_k: 3 }));
    await check('POST', '/v1/library/ask/stream', await server.post('/v1/library/ask/stream', ask));
    await check('POST', '/v1/library/search', await server.post('/v1/library/search', { query: 'rooms' }));
    await check('GET', '/v1/library/collections', await server.get('/v1/library/collections'));
    fake.fault(/^\/api\//, { kind: 'status', status: 500 });
    await check('POST', '/v1/library/ask/stream', await server.post('/v1/library/ask/stream', ask));
    await check('GET', '/v1/library/collections', await server.get('/v1/library/collections'));
  });
});
