/**
 * Closing a connection whose client may still be sending (nginx's lingering close). A request
 * refused before its body is read (401, 413, 429, a per-IP connection refusal…) is answered while
 * the client is still writing its body. Destroying the socket then, with unread bytes in its
 * receive buffer, makes the kernel send a reset, and a reset can reach the client before it has
 * read the answer: Node's http client and fetch report EPIPE/ECONNRESET instead of the refusal.
 * So: send the answer and stop sending (half-close), read and discard what the client still sends
 * — never buffered, never parsed — and destroy the socket when the client is done, or at a bound
 * of time and of bytes, whichever comes first, so that no client holds a socket by sending for ever.
 */
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';

/** How long and how much a closing connection is read and discarded for (a body above the 1 MB cap, in full). */
export const LINGER = { ms: 5_000, bytes: 16 * 1024 * 1024 } as const;

const lingering = new WeakSet<Duplex>();

/** True when `socket` is closing lingeringly: a request parsed on it now is not served. */
export const isLingering = (socket: Duplex): boolean => lingering.has(socket);

/**
 * Half-close `socket` once what is written to it is sent (`last`, when given, is written first), then
 * discard what the client still sends until it ends its side, or `bounds` are spent; then destroy.
 */
export function lingeringClose(socket: Duplex, last?: string | Buffer, bounds: { ms: number; bytes: number } = LINGER): void {
  if (socket.destroyed || lingering.has(socket)) return;
  lingering.add(socket);
  let discarded = 0;
  const timer = setTimeout(() => socket.destroy(), bounds.ms);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
  // Our own listener takes the bytes from node's HTTP parser (which would parse whatever follows the
  // refused body as a next request); adding it also moves reading from node's native parser to here.
  const discard = (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > bounds.bytes) socket.destroy();
  };
  socket.on('data', discard);
  for (const listener of socket.listeners('data')) {
    if (listener !== discard) socket.removeListener('data', listener as (...args: unknown[]) => void);
  }
  socket.resume();
  // Node's parser may have stopped the socket's reading (a body nobody read fills its buffers);
  // resume() does not restart a read the stream thinks is pending, the socket's own _read does.
  socket._read(0);
  // The client ended its side: nothing unread is left, so closing (once the answer is out) sends no reset.
  socket.once('end', () => (socket.writableFinished ? socket.destroy() : socket.once('finish', () => socket.destroy())));
  if (last === undefined) socket.end();
  else socket.end(last);
}

/**
 * Make node's own close after the last answer of a connection (`Connection: close`: node calls the
 * socket's `destroySoon` once the answer is written) a lingering one.
 */
export function lingerAfterLastAnswer(socket: Socket): void {
  socket.destroySoon = () => lingeringClose(socket);
}
