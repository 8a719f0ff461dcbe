/**
 * The Library routes: ask, ask/stream, search, collections (spec + decisions: upstream services).
 *
 * The stream is a pass-through: frames are written to the socket as they arrive from the
 * upstream (heartbeat comments, `memory_update` after `done` and `event: shutdown` included) until
 * the upstream closes, with the head flushed before the first one and every buffering hint off. A
 * failure before the first frame is an ordinary 502 envelope; after it the response has started,
 * so the stream just ends cleanly. A visitor who hangs up cancels the
 * upstream request.
 */
import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { RouteModule, RouteTable } from '../route-table.ts';
import { unconfigured } from '../errors.ts';
import { clientGone, SSE_HEADERS } from '../response.ts';
import type { RouteContext } from '../types.ts';
import { UpstreamError } from '../upstream/http.ts';
import {
  LIBRARY_SERVICE,
  LibraryAnswer,
  LibraryAskRequest,
  type LibraryClient,
  LibraryCollection,
  LibrarySearchRequest,
  LibrarySearchResult,
  type LibraryStream,
} from '../upstream/library.ts';

/**
 * Wait until a slow client drained the socket buffer (or went away). A client that reads nothing
 * for `deadlineMs` is cut off: otherwise one that stops reading without hanging up would hold its
 * request, socket and megabytes of send buffer for as long as it likes.
 */
async function drained(res: ServerResponse, deadlineMs: number): Promise<void> {
  const stop = new AbortController();
  try {
    const progress = [once(res, 'drain', { signal: stop.signal }), once(res, 'close', { signal: stop.signal })];
    const expired = await Promise.race([...progress.map((p) => p.then(() => false)), delay(deadlineMs, true, { signal: stop.signal })]);
    if (expired) res.destroy();
  } finally {
    stop.abort();
  }
}

/** The configured Library client, or the 503 `unconfigured` error when there is none. */
type LibraryAccess = () => LibraryClient;

export const libraryRoutes: RouteModule = (api, { library: configured, log }) => {
  const client: LibraryAccess = () => {
    if (!configured) throw unconfigured(LIBRARY_SERVICE);
    return configured;
  };
  libraryQuestionRoutes(api, client, log);
  retrievalRoutes(api, client);
};

/** Asking the Library: the whole answer, or the answer streamed as it is written. */
function libraryQuestionRoutes(api: RouteTable, client: LibraryAccess, log: Logger): void {
  api.route({
    method: 'POST',
    path: '/v1/library/ask',
    operationId: 'askLibrary',
    summary: 'Ask the Library (retrieval Q&A with cited sources); use_agentic runs the deep mode',
    tag: 'library',
    access: 'key',
    body: LibraryAskRequest,
    response: { json: z.object({ data: LibraryAnswer }) },
    errors: [502, 503],
    async handler(ctx, { body }) {
      const library = client();
      ctx.body = { data: await library.ask(body, { signal: clientGone(ctx.res) }) };
    },
  });

  api.route({
    method: 'POST',
    path: '/v1/library/ask/stream',
    operationId: 'streamLibraryAnswer',
    summary: 'Ask the Library and stream the answer (Server-Sent Events)',
    tag: 'library',
    access: 'key',
    body: LibraryAskRequest,
    response: {
      sse:
        'Frames `data: <JSON>`: {content} token chunks, {sources}, {graph_context}, {thinking} and {sub_questions} (use_agentic), ' +
        'then {done: true}, possibly followed by {memory_update} (the conversation memory to keep for the next question) and, when the ' +
        'Library restarts, an `event: shutdown` frame; the stream ends when the Library closes it. Comment lines (`: ping`) are ' +
        'heartbeats.',
    },
    errors: [502, 503],
    async handler(ctx, { body }) {
      await libraryStream(ctx, client(), body, log);
    },
  });
}

/**
 * The stream's handler: waits for the upstream's first frame (a failure before it is an ordinary
 * error response), then sends the head and relays every frame.
 */
async function libraryStream(ctx: RouteContext, library: LibraryClient, body: LibraryAskRequest, log: Logger): Promise<void> {
  const gone = clientGone(ctx.res);
  const stream = await library.askStream(body, { signal: gone });
  const frames = stream[Symbol.asyncIterator]();
  let first: IteratorResult<string>;
  try {
    first = await frames.next();
  } catch (err) {
    stream.close();
    throw err;
  }
  if (gone.aborted) {
    ctx.respond = false; // nobody is listening any more
    return;
  }
  if (first.done) throw new UpstreamError(LIBRARY_SERVICE, 'body', '/api/ask/stream: the stream ended without a frame');

  ctx.status = 200;
  ctx.set(SSE_HEADERS);
  ctx.flushHeaders();
  ctx.respond = false; // we own the socket from here on
  await relayFrames(ctx, stream, first, frames, library.streamIdleMs, log);
}

/** Writes the frames to the socket as they arrive, until the upstream closes, then ends the response. */
async function relayFrames(
  ctx: RouteContext,
  stream: LibraryStream,
  first: IteratorResult<string>,
  frames: AsyncIterator<string>,
  idleMs: number,
  log: Logger,
): Promise<void> {
  const res = ctx.res;
  try {
    let next: IteratorResult<string> = first;
    while (!next.done) {
      if (!res.write(next.value)) await drained(res, idleMs);
      if (res.destroyed) break;
      next = await frames.next();
    }
  } catch (err) {
    // Mid-stream failure (stall, reset, garbage): the head is sent, so end cleanly; logged by the client.
    if (!(err instanceof UpstreamError)) log.error({ err, requestId: ctx.state.requestId }, 'library stream failed');
  } finally {
    stream.close();
    if (!res.destroyed) res.end();
  }
}

/** Retrieval without an answer: search, and the collections a question may be scoped to. */
function retrievalRoutes(api: RouteTable, client: LibraryAccess): void {
  api.route({
    method: 'POST',
    path: '/v1/library/search',
    operationId: 'searchLibrary',
    summary: 'Hybrid retrieval (vector, keyword, graph) without answer generation',
    tag: 'library',
    access: 'key',
    body: LibrarySearchRequest,
    response: { json: z.object({ data: LibrarySearchResult }) },
    errors: [502, 503],
    async handler(ctx, { body }) {
      const library = client();
      ctx.body = { data: await library.search(body, { signal: clientGone(ctx.res) }) };
    },
  });

  api.route({
    method: 'GET',
    path: '/v1/library/collections',
    operationId: 'listLibraryCollections',
    summary: 'Library collections (their id is the collection_id of ask and search)',
    tag: 'library',
    access: 'key',
    response: { json: z.object({ data: z.array(LibraryCollection) }) },
    errors: [502, 503],
    async handler(ctx) {
      const library = client();
      ctx.body = { data: await library.collections({ signal: clientGone(ctx.res) }) };
    },
  });
}
