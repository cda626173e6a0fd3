import type { ClientHttp2Stream } from 'node:http2';

/** A listener of a backend stream's events, as node:http2 types it (its catch-all overload's). */
type StreamListener = Parameters<ClientHttp2Stream['off']>[1];

/**
 * Listens on a backend stream until it closes, then takes every listener given here off it again.
 *
 * Why: node:http2 keeps a closed stream reachable until the next full collection (its native handle, held
 * weakly, still names the stream as its owner, and scavenges treat weak handles as roots). Whatever the
 * stream's listeners close over (the exchange, its tunnel stream, the request's heads, the inspector's slot)
 * then lived through two scavenges and was promoted, a few KB per call that only a full collection frees
 * (bench/README.md, "Issue #32: unary gRPC CPU per call"). Nothing is emitted on a stream after 'close'.
 * This 'close' listener comes first, and an emit calls the listeners it started with, so the caller's own
 * 'close' listener still runs.
 */
export function listenUntilClose(stream: ClientHttp2Stream): ClientHttp2Stream['on'] {
  const attached: [string | symbol, StreamListener][] = [];
  stream.once('close', () => {
    for (const [event, listener] of attached) stream.off(event, listener);
    attached.length = 0;
  });
  return (event: string | symbol, listener: StreamListener): ClientHttp2Stream => {
    attached.push([event, listener]);
    return stream.on(event, listener);
  };
}
