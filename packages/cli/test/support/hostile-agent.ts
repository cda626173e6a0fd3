import { once } from 'node:events';
import {
  decodeRequestHead,
  encodeResponseHead,
  MuxSession,
  type MuxStream,
  type RequestHead,
} from '@tunnel2/protocol';
import WebSocket from 'ws';

/**
 * What a test's hostile agent does with each request: whatever it likes with the stream, or with `raw`,
 * which sends bytes (frames the test encoded itself) past the session's own checks, once the transport
 * has taken them.
 */
export type HostileAnswer = (
  stream: MuxStream,
  request: RequestHead,
  raw: (bytes: Buffer) => Promise<void>,
) => void;

/**
 * An agent written in the test: it speaks the protocol correctly (HELLO, flow control) but answers every
 * request through `answer`, so a test can send the edge any head and any body. Returns the closer.
 */
export async function hostileAgent(
  url: string,
  name: string,
  answer: HostileAnswer,
  meta: Record<string, unknown> = {},
): Promise<() => void> {
  const ws = new WebSocket(`${url.replace('http', 'ws')}/_tunnel2/connect?name=${name}`, {
    perMessageDeflate: false,
  });
  await once(ws, 'open');
  const raw = (bytes: Buffer) =>
    new Promise<void>((resolve, reject) =>
      ws.send(bytes, { binary: true }, (err) => (err ? reject(err) : resolve())),
    );
  let helloAnswered: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    helloAnswered = resolve;
  });
  const session = new MuxSession({
    role: 'agent',
    settings: { heartbeatIntervalMs: 0 },
    transport: {
      send: (message, done) => ws.send(message, { binary: true }, done),
      close: () => ws.close(),
    },
    handler: {
      onHello: () => helloAnswered(),
      onClose: () => {},
      onStream: (stream) => {
        stream.handler = {
          onHeaders: (payload) => answer(stream, decodeRequestHead(payload), raw),
          onData: (chunk) => stream.consume(chunk.length),
          onEnd: () => {},
          onReset: () => {},
          onDrain: () => {},
        };
      },
    },
  });
  ws.on('message', (data) => session.receive(data as Buffer));
  ws.on('close', () => session.transportClosed());
  session.sendHello({ agent: 'hostile', ...meta }, false);
  await ready;
  return () => ws.terminate();
}

/**
 * A response head payload, with any status (the encoder refuses those outside 100-999, a hostile agent
 * does not have to use it): the status is written over the encoded one.
 */
export function responseHead(status: number, headers: string[] = [], statusMessage = ''): Buffer {
  const payload = encodeResponseHead({ status: 200, statusMessage, headers }, 65_536);
  payload.writeUInt16BE(status, 0);
  return payload;
}
