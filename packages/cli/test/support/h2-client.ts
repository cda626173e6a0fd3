import type { ClientHttp2Session, IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import { connect } from 'node:http2';

/** One HTTP/2 exchange as a test reads it: interim heads, the final head, the body, trailers, a reset. */
export interface H2Answer {
  interim: IncomingHttpHeaders[];
  headers: IncomingHttpHeaders;
  status: number;
  body: Buffer;
  trailers: IncomingHttpHeaders | undefined;
  /** The RST_STREAM code when the stream was reset rather than ended. */
  rstCode: number | undefined;
}

/** An h2c client with prior knowledge (Node's own), on loopback. */
export function h2c(port: number): ClientHttp2Session {
  const session = connect(`http://127.0.0.1:${port}`);
  session.on('error', () => {});
  return session;
}

/**
 * Sends one request on `session` and collects what came back. `body` chunks are written one by one (a
 * streamed body); `trailers` are sent after them.
 */
export function h2Request(
  session: ClientHttp2Session,
  headers: OutgoingHttpHeaders,
  options: { body?: (string | Buffer)[]; trailers?: OutgoingHttpHeaders } = {},
): Promise<H2Answer> {
  const { body, trailers } = options;
  const ends = body === undefined && trailers === undefined;
  const stream = session.request(headers, { endStream: ends, waitForTrailers: trailers !== undefined });
  if (trailers !== undefined) stream.on('wantTrailers', () => stream.sendTrailers(trailers));
  if (!ends) {
    for (const chunk of body ?? []) stream.write(chunk);
    stream.end();
  }
  return new Promise((resolve, reject) => {
    const answer: H2Answer = {
      interim: [],
      headers: {},
      status: 0,
      body: Buffer.alloc(0),
      trailers: undefined,
      rstCode: undefined,
    };
    const chunks: Buffer[] = [];
    stream.on('headers', (h) => answer.interim.push(h));
    stream.on('response', (h) => {
      answer.headers = h;
      answer.status = Number(h[':status']);
    });
    stream.on('trailers', (t) => {
      answer.trailers = t;
    });
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('error', () => {});
    stream.on('close', () => {
      answer.body = Buffer.concat(chunks);
      if (stream.rstCode !== 0) answer.rstCode = stream.rstCode;
      if (answer.status === 0 && answer.rstCode === undefined) reject(new Error('no response'));
      else resolve(answer);
    });
  });
}
