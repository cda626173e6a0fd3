import type { IncomingMessage, ServerResponse } from 'node:http';
import type { EdgeHttp2Request, EdgeHttp2Response } from './http2-messages.js';

// The edge's own pages over HTTP/2 (the landing page, the ops routes on the public port, the 404): Fastify's
// router reads Node's request and response, so a stream that is no tunnel's is handed to Node's HTTP/2
// compatibility objects, which Fastify itself uses in its HTTP/2 mode. Only on this rare path: a tunnel's
// stream stays on the raw stream API (http2-messages.ts), without the two stream objects per request these
// cost. Not an `import` of values: the edge loads node:http2 only where it is used.
const { Http2ServerRequest, Http2ServerResponse } = process.getBuiltinModule('node:http2');

/**
 * The stream of `req` and `res` as Node's compatibility request and response, typed as the HTTP/1.1 ones
 * Fastify's router is given (it reads the same members of both). `res` then reads as what was answered
 * there (status, finished), for the metrics and the access log that listen on it.
 */
export function compatibilityPair(
  req: EdgeHttp2Request,
  res: EdgeHttp2Response,
): [IncomingMessage, ServerResponse] {
  res.handOver();
  const stream = req.stream;
  // The request first: the response finds it on the stream.
  const compatReq = new Http2ServerRequest(stream, req.headers, {}, req.rawHeaders);
  const compatRes = new Http2ServerResponse(stream);
  // 'finish' of the stream's writable side comes before its 'close', where `res` reports the outcome.
  stream.once('finish', () => res.handedOverFinished(compatRes.statusCode, compatRes.getHeaders()));
  return [compatReq as unknown as IncomingMessage, compatRes as unknown as ServerResponse];
}
