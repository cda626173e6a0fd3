import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import {
  decodeRequestHead,
  defaultSettings,
  ErrorCode,
  encodeFrame,
  encodeHello,
  encodeReset,
  FrameFlags,
  FrameType,
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

const small = { initialStreamWindow: 16 * 1024, initialSessionWindow: 64 * 1024, maxFrameSize: 16 * 1024 };

/** Resolves with the next stream the agent accepts, recorded. */
function nextAgentStream(pair: Pair, mode: 'sync' | 'manual' = 'sync'): Promise<StreamRecorder> {
  const opened = deferred<StreamRecorder>();
  pair.agent.events.onStreamOpened = (stream) => opened.resolve(new StreamRecorder(stream, mode));
  return opened.promise;
}

describe('streams', () => {
  it('carries one request and response, edge ids odd and increasing', async () => {
    const pair = await pairFor();
    serveEcho(pair);
    const first = await exchange(pair, '/hello?x=%20y', Buffer.from('ping'));
    expect(first.response).toEqual({
      status: 200,
      statusMessage: 'OK',
      headers: ['X-Target', '/hello?x=%20y', 'X-Stream', '1'],
    });
    expect(first.body.toString()).toBe('ping');
    const second = await exchange(pair, '/empty', Buffer.alloc(0));
    expect(second.stream.id).toBe(3);
    expect(second.body.length).toBe(0);
    expect(pair.edge.session.streams.size).toBe(0);
    expect(pair.agent.session.streams.size).toBe(0);
  });

  it('lets the agent open streams too, with even ids', async () => {
    const pair = await pairFor();
    const atEdge = deferred<StreamRecorder>();
    pair.edge.events.onStreamOpened = (stream) => atEdge.resolve(new StreamRecorder(stream));
    const a = pair.agent.session.openStream();
    const b = pair.agent.session.openStream();
    expect([a.id, b.id]).toEqual([2, 4]);
    a.sendHeaders(requestHead('/from-agent'), true);
    const recorder = await atEdge.promise;
    await recorder.ended.promise;
    expect(recorder.stream.id).toBe(2);
    expect(decodeRequestHead(recorder.heads[0]!).target).toBe('/from-agent');
  });

  it('keeps many concurrent streams apart, interleaved on the wire', async () => {
    const pair = await pairFor({ settings: small });
    serveEcho(pair, { mode: 'next-turn', chunkSize: 5000 });
    const bodies = Array.from({ length: 40 }, (_, i) => randomBytes((i * 7919) % 150_000));
    const results = await Promise.all(bodies.map((body, i) => exchange(pair, `/item/${i}`, body, 9000)));
    results.forEach((result, i) => {
      expect(result.response.headers).toEqual([
        'X-Target',
        `/item/${i}`,
        'X-Stream',
        String(result.stream.id),
      ]);
      expect(result.body.equals(bodies[i]!), `body of stream ${result.stream.id}`).toBe(true);
    });
    const dataStreams = pair.edge.transport.sent.frames
      .filter((f) => f.type === FrameType.DATA)
      .map((f) => f.streamId);
    const switches = dataStreams.filter((id, i) => i > 0 && id !== dataStreams[i - 1]).length;
    expect(switches).toBeGreaterThan(bodies.length);
    expect(pair.edge.session.streams.size).toBe(0);
    expect(pair.agent.session.streams.size).toBe(0);
  });

  it('carries trailers as a second HEADERS with END_STREAM after the body', async () => {
    const pair = await pairFor();
    const atAgent = nextAgentStream(pair);
    const stream = pair.edge.session.openStream();
    new StreamRecorder(stream);
    stream.sendHeaders(requestHead('/upload'), false);
    expect(stream.write(Buffer.from('part'))).toBe(true);
    stream.sendHeaders(requestHead('/trailers'), true);
    const agent = await atAgent;
    await agent.ended.promise;
    expect(agent.heads.map((h) => decodeRequestHead(h).target)).toEqual(['/upload', '/trailers']);
    expect(agent.body().toString()).toBe('part');
    expect(() => stream.sendHeaders(requestHead('/again'), true)).toThrow(
      expect.objectContaining({ code: ProtocolErrorCode.STREAM_STATE }),
    );
  });

  it('refuses to open more streams than the peer allows', async () => {
    const pair = await pairFor({ agentSettings: { maxConcurrentStreams: 2 } });
    pair.edge.session.openStream();
    pair.edge.session.openStream();
    expect(() => pair.edge.session.openStream()).toThrow(
      expect.objectContaining({
        code: ProtocolErrorCode.TOO_MANY_STREAMS,
        protocolCode: ErrorCode.REFUSED_STREAM,
      }),
    );
  });
});

describe('RESET', () => {
  it('a RESET from the agent reaches the edge’s onReset with its code', async () => {
    const pair = await pairFor();
    const atAgent = nextAgentStream(pair);
    const stream = pair.edge.session.openStream();
    const edgeSide = new StreamRecorder(stream);
    stream.sendHeaders(requestHead('/down'), true);
    (await atAgent).stream.reset(ErrorCode.BACKEND_UNREACHABLE);
    const error = await edgeSide.resetError.promise;
    expect(error.protocolCode).toBe(ErrorCode.BACKEND_UNREACHABLE);
    expect(error.code).toBe('TUNNEL2_ERR_STREAM_RESET');
    expect(stream.closed).toBe(true);
    expect(pair.edge.session.streams.size).toBe(0);
    expect(pair.agent.session.streams.size).toBe(0);
  });

  it('a RESET from the edge reaches the agent’s onReset with its code', async () => {
    const pair = await pairFor();
    const atAgent = nextAgentStream(pair);
    const stream = pair.edge.session.openStream();
    new StreamRecorder(stream);
    stream.sendHeaders(requestHead('/slow'), false);
    const agentSide = await atAgent;
    await agentSide.waitForHeads();
    stream.reset(ErrorCode.CANCEL);
    expect((await agentSide.resetError.promise).protocolCode).toBe(ErrorCode.CANCEL);
    expect(agentSide.stream.write(Buffer.from('too late'))).toBe(false);
  });

  it('DATA still in flight after a reset is dropped and its session credit returned', async () => {
    const windows = {
      initialStreamWindow: 64 * 1024,
      initialSessionWindow: 64 * 1024,
      maxFrameSize: 16 * 1024,
    };
    const pair = await pairFor({ settings: windows });
    const atAgent = deferred<StreamRecorder>();
    pair.agent.events.onStreamOpened = (stream) => {
      const recorder = new StreamRecorder(stream, 'manual');
      recorder.onChunk = () => stream.reset(ErrorCode.CANCEL);
      atAgent.resolve(recorder);
    };
    const stream = pair.edge.session.openStream();
    const edgeSide = new StreamRecorder(stream);
    stream.sendHeaders(requestHead('/upload'), false);
    // Three 16 KiB DATA frames go out in one message; the agent resets on the first.
    expect(stream.write(Buffer.alloc(48 * 1024, 1))).toBe(true);
    await edgeSide.resetError.promise;
    const agentSide = await atAgent.promise;
    expect(agentSide.received).toBe(16 * 1024);
    // The WINDOW_UPDATEs travel in the same message as the RESET, so the whole window is back.
    expect(pair.edge.session.sessionSendWindow).toBe(64 * 1024);
    expect(pair.agent.session.closed).toBe(false);
  });
});

describe('stream ids and states (raw peer)', () => {
  const hello = encodeHello(
    { minVersion: 1, maxVersion: 1, settings: { ...defaultSettings }, meta: {} },
    true,
  );
  const headers = (id: number, flags = 0) => encodeFrame(FrameType.HEADERS, flags, id, requestHead('/'));

  it('ignores HEADERS for a stream id at or below the last one seen (a stale stream)', async () => {
    const peer = createRawPeer('agent');
    const opened: number[] = [];
    peer.events.onStreamOpened = (stream) => {
      opened.push(stream.id);
      new StreamRecorder(stream).onHead = () => stream.reset(ErrorCode.NO_ERROR);
    };
    peer.feed(hello, headers(5), headers(3), headers(5), headers(2), headers(7));
    expect(opened).toEqual([5, 7]);
    expect(peer.session.closed).toBe(false);
    peer.session.transportClosed();
  });

  it('refuses a stream beyond its own concurrency limit with RESET REFUSED_STREAM', async () => {
    const peer = createRawPeer('agent', { maxConcurrentStreams: 1 });
    peer.events.onStreamOpened = (stream) => void new StreamRecorder(stream);
    peer.feed(hello, headers(1), headers(3));
    const reset = await peer.sent.waitFor((f) => f.type === FrameType.RESET);
    expect(reset.streamId).toBe(3);
    expect(reset.payload.readUInt32BE(0)).toBe(ErrorCode.REFUSED_STREAM);
    expect(peer.session.streams.values().map((stream) => stream.id)).toEqual([1]);
    peer.session.transportClosed();
  });

  it('closes the session on DATA for a stream the peer never opened', async () => {
    const peer = createRawPeer('agent');
    peer.feed(hello, encodeFrame(FrameType.DATA, 0, 9, Buffer.from('x')));
    expect(await peer.events.closed.promise).toMatchObject({ code: ProtocolErrorCode.MALFORMED_FRAME });
  });

  it('resets a stream with STREAM_CLOSED on HEADERS after END_STREAM', async () => {
    const peer = createRawPeer('agent');
    const opened = deferred<StreamRecorder>();
    peer.events.onStreamOpened = (stream) => opened.resolve(new StreamRecorder(stream));
    peer.feed(hello, headers(1, FrameFlags.END_STREAM), headers(1));
    const recorder = await opened.promise;
    await recorder.ended.promise;
    const reset = await peer.sent.waitFor((f) => f.type === FrameType.RESET);
    expect(reset).toMatchObject({ streamId: 1 });
    expect(reset.payload.readUInt32BE(0)).toBe(ErrorCode.STREAM_CLOSED);
    expect(peer.session.closed).toBe(false);
    // A RESET for a stream that is already gone is ignored.
    peer.feed(encodeReset(1, ErrorCode.CANCEL));
    expect(peer.session.closed).toBe(false);
    peer.session.transportClosed();
  });
  it('delivers DATA that carries both bytes and END_STREAM', async () => {
    const peer = createRawPeer('agent');
    const opened = deferred<StreamRecorder>();
    peer.events.onStreamOpened = (stream) => opened.resolve(new StreamRecorder(stream));
    peer.feed(hello, headers(1), encodeFrame(FrameType.DATA, FrameFlags.END_STREAM, 1, Buffer.from('body')));
    const recorder = await opened.promise;
    await recorder.ended.promise;
    expect(recorder.body().toString()).toBe('body');
    expect(recorder.stream.remoteEnded).toBe(true);
    peer.session.transportClosed();
  });

  it('ignores a WINDOW_UPDATE for a stream that is gone', async () => {
    const peer = createRawPeer('agent');
    peer.events.onStreamOpened = (stream) => new StreamRecorder(stream).stream.reset(ErrorCode.CANCEL);
    peer.feed(hello, headers(1), encodeFrame(FrameType.WINDOW_UPDATE, 0, 1, Buffer.from([0, 0, 1, 0])));
    expect(peer.session.closed).toBe(false);
    expect(peer.session.streams.size).toBe(0);
    peer.session.transportClosed();
  });
});
