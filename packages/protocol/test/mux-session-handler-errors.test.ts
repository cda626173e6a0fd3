import { afterEach, describe, expect, it } from 'vitest';
import {
  decodeRequestHead,
  defaultSettings,
  ErrorCode,
  encodeFrame,
  encodeHello,
  encodeRequestHead,
  FrameType,
  type MuxStream,
  ProtocolErrorCode,
} from '../src/index.js';
import { deferred } from './support/deferred.js';
import { exchange, requestHead, serveEcho } from './support/exchange.js';
import { connectPair, createRawPeer, type Pair } from './support/mux-harness.js';
import { StreamRecorder } from './support/stream-recorder.js';

const pairs: Pair[] = [];
async function pairFor(options: Parameters<typeof connectPair>[0] = {}): Promise<Pair> {
  const pair = await connectPair(options);
  pairs.push(pair);
  return pair;
}
afterEach(() => {
  for (const pair of pairs.splice(0)) pair.dispose();
});

const hello = encodeHello({ minVersion: 1, maxVersion: 1, settings: { ...defaultSettings }, meta: {} }, true);
const headers = (id: number) => encodeFrame(FrameType.HEADERS, 0, id, requestHead('/'));

describe('handlers that throw', () => {
  it('a throwing onHeaders resets only its own stream with INTERNAL_ERROR', async () => {
    const pair = await pairFor();
    const boom = new Error('handler bug');
    serveEcho(pair);
    const echo = pair.agent.events.onStreamOpened!;
    pair.agent.events.onStreamOpened = (stream: MuxStream) => {
      echo(stream);
      (stream.handler as StreamRecorder).onHead = (head) => {
        if (decodeRequestHead(head).target === '/boom') throw boom;
      };
    };
    const bad = new StreamRecorder(pair.edge.session.openStream());
    bad.stream.sendHeaders(requestHead('/boom'), true);
    const good = exchange(pair, '/fine', Buffer.from('still works'));
    expect((await bad.resetError.promise).protocolCode).toBe(ErrorCode.INTERNAL_ERROR);
    expect((await good).body.toString()).toBe('still works');
    expect(pair.agent.events.streamErrors).toEqual([
      { stream: expect.objectContaining({ id: bad.stream.id }), error: boom },
    ]);
    expect(pair.agent.session.closed || pair.edge.session.closed).toBe(false);
  });

  it('a throwing onStream resets that stream', async () => {
    const pair = await pairFor();
    pair.agent.events.onStreamOpened = () => {
      throw new Error('cannot serve');
    };
    const recorder = new StreamRecorder(pair.edge.session.openStream());
    recorder.stream.sendHeaders(requestHead('/'), true);
    expect((await recorder.resetError.promise).protocolCode).toBe(ErrorCode.INTERNAL_ERROR);
    expect(pair.agent.events.streamErrors).toHaveLength(1);
  });

  it('a throwing onDrain after transport congestion resets only that stream', async () => {
    const pair = await pairFor({ highWaterMark: 1024 });
    const atAgent = deferred<StreamRecorder>();
    pair.agent.events.onStreamOpened = (stream) => atAgent.resolve(new StreamRecorder(stream));
    const edge = new StreamRecorder(pair.edge.session.openStream());
    edge.stream.sendHeaders(requestHead('/'), false);
    const agent = await atAgent.promise;
    const boom = new Error('drain bug');
    edge.onDrain = () => {
      throw boom;
    };
    expect(edge.stream.write(Buffer.alloc(4096))).toBe(false);
    expect((await agent.resetError.promise).protocolCode).toBe(ErrorCode.INTERNAL_ERROR);
    expect(pair.edge.events.streamErrors).toEqual([{ stream: edge.stream, error: boom }]);
    expect(pair.edge.session.closed).toBe(false);
  });

  it('a throwing onReset does not keep other streams or the owner from hearing the session closed', async () => {
    const peer = createRawPeer('agent');
    const recorders: StreamRecorder[] = [];
    peer.events.onStreamOpened = (stream) => recorders.push(new StreamRecorder(stream));
    peer.feed(hello, headers(1), headers(3), headers(5));
    const boom = new Error('reset bug');
    recorders[0]!.onReset = () => {
      throw boom;
    };
    peer.session.transportClosed();
    expect(await peer.events.closed.promise).toBeUndefined();
    for (const recorder of recorders.slice(1)) {
      expect((await recorder.resetError.promise).protocolCode).toBe(ErrorCode.SESSION_CLOSED);
    }
    expect(peer.session.streams.size).toBe(0);
    expect(peer.events.streamErrors).toEqual([{ stream: recorders[0]!.stream, error: boom }]);
  });

  it('a throwing onReset on a GOAWAY refusal does not end the session', async () => {
    const pair = await pairFor();
    const refused = new StreamRecorder(pair.edge.session.openStream());
    const boom = new Error('reset bug');
    refused.onReset = () => {
      throw boom;
    };
    pair.agent.session.goAway();
    await pair.edge.events.goAway.promise;
    expect(refused.stream.closed).toBe(true);
    expect(pair.edge.session.closed).toBe(false);
    expect(pair.edge.events.streamErrors).toEqual([{ stream: refused.stream, error: boom }]);
  });
});

describe('resets the session makes on its own', () => {
  it('a ProtocolError from a handler (malformed head) resets with its code; the handler hears onReset', async () => {
    const pair = await pairFor();
    const atAgent = deferred<StreamRecorder>();
    pair.agent.events.onStreamOpened = (stream) => {
      const recorder = new StreamRecorder(stream);
      // What a real owner does first: decode the head, which throws MALFORMED_HEAD here.
      recorder.onHead = (head) => void decodeRequestHead(head.subarray(0, 3));
      atAgent.resolve(recorder);
    };
    const edge = new StreamRecorder(pair.edge.session.openStream());
    edge.stream.sendHeaders(requestHead('/'), true);
    const agent = await atAgent.promise;
    expect((await agent.resetError.promise).protocolCode).toBe(ErrorCode.PROTOCOL_ERROR);
    expect((await edge.resetError.promise).protocolCode).toBe(ErrorCode.PROTOCOL_ERROR);
    // A ProtocolError is the peer's fault, not a handler bug.
    expect(pair.agent.events.streamErrors).toEqual([]);
    expect(pair.agent.session.closed).toBe(false);
  });

  it('a stream reset for a state violation (HEADERS after END_STREAM) tells its handler', async () => {
    const peer = createRawPeer('agent');
    const opened = deferred<StreamRecorder>();
    peer.events.onStreamOpened = (stream) => opened.resolve(new StreamRecorder(stream));
    peer.feed(hello, encodeFrame(FrameType.HEADERS, 1, 1, requestHead('/')), headers(1));
    const recorder = await opened.promise;
    expect((await recorder.resetError.promise).protocolCode).toBe(ErrorCode.STREAM_CLOSED);
    const reset = await peer.sent.waitFor((f) => f.type === FrameType.RESET);
    expect(reset.payload.readUInt32BE(0)).toBe(ErrorCode.STREAM_CLOSED);
    peer.session.transportClosed();
  });

  it('a handler that throws a plain error hears onReset(INTERNAL_ERROR) and is reported', async () => {
    const pair = await pairFor();
    const boom = new Error('bug');
    const atAgent = deferred<StreamRecorder>();
    pair.agent.events.onStreamOpened = (stream) => {
      const recorder = new StreamRecorder(stream);
      recorder.onChunk = () => {
        throw boom;
      };
      atAgent.resolve(recorder);
    };
    const edge = new StreamRecorder(pair.edge.session.openStream());
    edge.stream.sendHeaders(requestHead('/'), false);
    edge.stream.write(Buffer.from('body'));
    const agent = await atAgent.promise;
    expect((await agent.resetError.promise).protocolCode).toBe(ErrorCode.INTERNAL_ERROR);
    expect(pair.agent.events.streamErrors).toEqual([{ stream: agent.stream, error: boom }]);
  });
});

describe('closing from inside a callback', () => {
  it('frames after the one whose handler closed the session reach no handler', async () => {
    const peer = createRawPeer('agent');
    const events: string[] = [];
    peer.events.onStreamOpened = (stream) => {
      events.push(`stream ${stream.id}`);
      new StreamRecorder(stream);
      peer.session.close(ErrorCode.NO_ERROR, 'enough');
    };
    peer.events.closed.promise.then(() => events.push('closed'));
    peer.events.goAway.promise.then(() => events.push('goaway'));
    // One message: HELLO, a stream whose handler closes the session, then more frames.
    peer.feed(hello, headers(1), headers(3), encodeFrame(FrameType.GOAWAY, 0, 0, Buffer.alloc(8)));
    await peer.events.closed.promise;
    expect(events).toEqual(['stream 1', 'closed']);
    expect(peer.session.streams.size).toBe(0);
  });
});

describe('heads larger than the peer accepts', () => {
  it('sendHeaders refuses a head over the peer’s maxFrameSize instead of breaking the session', async () => {
    const pair = await pairFor({ agentSettings: { maxFrameSize: 16 * 1024 } });
    const stream = pair.edge.session.openStream();
    new StreamRecorder(stream);
    const huge = encodeRequestHead(
      { method: 'GET', target: '/', headers: ['X-Big', 'x'.repeat(20_000)] },
      1 << 20,
    );
    expect(() => stream.sendHeaders(huge, true)).toThrow(
      expect.objectContaining({
        code: ProtocolErrorCode.HEAD_TOO_LARGE,
        protocolCode: ErrorCode.HEADERS_TOO_LARGE,
      }),
    );
    stream.reset(ErrorCode.HEADERS_TOO_LARGE);
    serveEcho(pair);
    expect((await exchange(pair, '/after', Buffer.from('ok'))).body.toString()).toBe('ok');
  });
});
