import type { PublicResponse } from './public-message.js';

/**
 * How long an aborted response's last bytes may take to leave for a client that is not reading: past it,
 * the connection is destroyed with them.
 */
export const ABORT_FLUSH_MS = 1_000;

/**
 * Aborts a response whose head is already set (the client must see it cut, never complete), after what was
 * written to it has left for the socket. Node corks a response's socket until the next tick and does not
 * even write a head set by `writeHead` until the first body write; `res.destroy()` in the same tick throws
 * all of it away. Under load the agent sends a response's HEADERS, DATA and RESET in one WebSocket message,
 * decoded in one tick, so a client whose backend sent a head and then closed got a bare reset instead of
 * that head and an aborted body.
 */
export function abortResponse(res: PublicResponse, h2Code?: number): void {
  // HTTP/2: the stream alone is reset (INTERNAL_ERROR unless `h2Code`), after what was written to it: the
  // connection carries other streams.
  if (res.abortStream !== undefined) {
    res.abortStream(h2Code);
    return;
  }
  const socket = res.socket;
  if (socket === null || socket.destroyed || !res.headersSent) {
    res.destroy();
    return;
  }
  // Writes the head if only `writeHead` has run (a no-op once it is out), then lets the corked bytes go.
  res.flushHeaders();
  while (socket.writableCorked > 0) socket.uncork();
  if (socket.writableLength === 0) {
    res.destroy();
    return;
  }
  // The kernel's buffer is full: the rest goes when the client reads, for a bounded time.
  const destroy = (): void => {
    clearTimeout(timer);
    socket.off('drain', destroy);
    socket.off('close', destroy);
    res.destroy();
  };
  const timer = setTimeout(destroy, ABORT_FLUSH_MS);
  socket.once('drain', destroy);
  socket.once('close', destroy);
}
