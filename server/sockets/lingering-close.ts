/**
 * Closing a connection whose client may still be sending (nginx's lingering close). A request
 * refused before its body is read (401, 413, 429, a per-IP connection refusal…) is answered while
 * the client is still writing its body. Closing the socket then, with unread bytes in its receive
 * buffer, makes the kernel send a reset, and a reset can reach the client before it has read the
 * answer: Node's http client and fetch report EPIPE/ECONNRESET instead of the refusal. So: write
 * the whole response and end our side, read and discard the rest of the body, and only then destroy
 * the socket — or at a bound of time and of bytes, whichever comes first, so that no client holds
 * a socket by sending for ever.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** How long and how much a refused body is read and discarded for (a body above the 1 MB cap, in full). */
export const LINGER = { ms: 5_000, bytes: 16 * 1024 * 1024 } as const;

export interface LingerBounds {
  ms: number;
  bytes: number;
}

/** A whole response written before the request's body is read. */
export interface ClosingResponse {
  status: number;
  headers: Record<string, string>;
  body: string | Buffer;
}

/**
 * Read and discard the rest of `req`'s body: true once it has ended, false when `bounds` ran out
 * first (the caller destroys the connection) or the client went away.
 */
export function discardBody(req: IncomingMessage, bounds: LingerBounds = LINGER): Promise<boolean> {
  if (req.complete) return Promise.resolve(true);
  return new Promise((resolve) => {
    let discarded = 0;
    const done = (whole: boolean) => {
      clearTimeout(timer);
      req.off('data', count);
      req.off('end', ended);
      req.off('close', gone);
      resolve(whole);
    };
    const count = (chunk: Buffer) => {
      discarded += chunk.length;
      if (discarded > bounds.bytes) done(false);
    };
    const ended = () => done(true);
    const gone = () => done(req.complete);
    const timer = setTimeout(() => done(false), bounds.ms);
    timer.unref();
    req.on('data', count);
    req.once('end', ended);
    req.once('close', gone);
    req.resume();
  });
}

/**
 * Answer `req` while its body is still unread: the whole response is written and our side of the
 * connection ended at once (the client reads it while it sends), then the rest of the body is
 * discarded and the connection destroyed, within `bounds`. A client waiting for `100 Continue`
 * (`bodyWillCome` false) sends no body: its response ends as any other (node closes after it).
 */
export function respondBeforeBody(
  req: IncomingMessage,
  res: ServerResponse,
  response: ClosingResponse,
  bodyWillCome = true,
  bounds: LingerBounds = LINGER,
): void {
  res.writeHead(response.status, { ...response.headers, Connection: 'close' });
  if (!bodyWillCome) {
    res.end(response.body);
    return;
  }
  res.write(response.body);
  // The response stays unended: node would destroy the socket after it, unread bytes and all (a reset).
  req.socket.end();
  void discardBody(req, bounds).then((whole) => (whole ? destroyOnceSent(req.socket) : req.socket.destroy()));
}

/** Destroy `socket` once what was written to it has been handed to the kernel (at once if it has; within 1 s). */
export function destroyOnceSent(socket: Socket): void {
  if (socket.writableFinished || socket.destroyed) {
    socket.destroy();
    return;
  }
  const timer = setTimeout(() => socket.destroy(), 1_000);
  timer.unref();
  socket.once('finish', () => {
    clearTimeout(timer);
    socket.destroy();
  });
}

/** Sockets answered by `endAfterClientError`: node's parser reports each later byte as another error. */
const respondedAfterError = new WeakSet<Socket>();

/**
 * A connection whose request node's parser rejected (no request object): send `last` and end our
 * side, then wait for the client to end its side — what it still sends is read and dropped by node's
 * parser — and destroy the socket then, or at `bounds`.
 */
export function endAfterClientError(socket: Socket, last: string, bounds: LingerBounds = LINGER): void {
  if (respondedAfterError.has(socket)) return;
  respondedAfterError.add(socket);
  const timer = setTimeout(() => socket.destroy(), bounds.ms);
  timer.unref();
  const destroyPastBytes = () => {
    if (socket.bytesRead > bounds.bytes) socket.destroy();
  };
  socket.on('data', destroyPastBytes);
  socket.once('close', () => clearTimeout(timer));
  // The client ended its side: nothing unread is left, so closing (once the response is out) sends no reset.
  socket.once('end', () => destroyOnceSent(socket));
  socket.end(last);
  socket.resume();
}

/** True when `socket` has been answered after a parser error (later errors on it are that client still sending). */
export const respondedToClientError = (socket: Socket): boolean => respondedAfterError.has(socket);

/** Each connection's latest response (node's 'request' event): a parser error while it is being sent must not write into it. */
const latestResponse = new WeakMap<Socket, ServerResponse>();

export function trackResponses(server: {
  on(event: 'request', listener: (req: IncomingMessage, res: ServerResponse) => void): unknown;
}): void {
  server.on('request', (req, res) => latestResponse.set(req.socket, res));
}

/** A response has started on `socket` and is not finished: nothing else may be written to it. */
export function responseInProgress(socket: Socket): boolean {
  const res = latestResponse.get(socket);
  return res?.headersSent === true && !res.writableFinished;
}
