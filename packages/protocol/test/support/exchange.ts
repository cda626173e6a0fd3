import {
  decodeRequestHead,
  decodeResponseHead,
  encodeRequestHead,
  encodeResponseHead,
  type MuxStream,
  type RequestHead,
  type ResponseHead,
} from '../../src/index.js';
import type { Pair } from './mux-harness.js';
import { type ConsumeMode, StreamRecorder, writeBody } from './stream-recorder.js';

export const HEAD_LIMIT = 64 * 1024;

/**
 * Makes the agent an echo server: each request's body comes back as the response body, with the request
 * target and the stream id in response headers, so a test can tell whether anything got mixed up.
 */
export function serveEcho(pair: Pair, options: { mode?: ConsumeMode; chunkSize?: number } = {}): void {
  pair.agent.events.onStreamOpened = (stream) => {
    const recorder = new StreamRecorder(stream, options.mode ?? 'sync');
    void recorder.ended.promise.then(async () => {
      const request = decodeRequestHead(recorder.heads[0]!);
      const response: ResponseHead = {
        status: 200,
        statusMessage: 'OK',
        headers: ['X-Target', request.target, 'X-Stream', String(stream.id)],
      };
      stream.sendHeaders(encodeResponseHead(response, HEAD_LIMIT), false);
      await writeBody(recorder, recorder.body(), options.chunkSize ?? 7000);
    });
  };
}

export interface ExchangeResult {
  stream: MuxStream;
  response: ResponseHead;
  body: Buffer;
}

/** Sends one request from the edge (head, then the body honouring backpressure) and waits for the response. */
export async function exchange(
  pair: Pair,
  target: string,
  body: Buffer,
  chunkSize = 10_000,
): Promise<ExchangeResult> {
  const stream = pair.edge.session.openStream();
  const recorder = new StreamRecorder(stream);
  const request: RequestHead = { method: 'POST', target, headers: ['Content-Length', String(body.length)] };
  stream.sendHeaders(encodeRequestHead(request, HEAD_LIMIT), body.length === 0);
  if (body.length > 0) await writeBody(recorder, body, chunkSize);
  await recorder.ended.promise;
  return { stream, response: decodeResponseHead(recorder.heads[0]!), body: recorder.body() };
}

/** A request head with no body, for streams whose body does not matter. */
export function requestHead(target: string): Buffer {
  return encodeRequestHead({ method: 'GET', target, headers: ['Host', 'test'] }, HEAD_LIMIT);
}
