import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import {
  defaultSettings,
  ErrorCode,
  encodeFrame,
  encodeHello,
  encodeWindowUpdate,
  FrameType,
  MAX_WINDOW,
  type MuxStream,
  ProtocolError,
  ProtocolErrorCode,
  type ProtocolSettings,
  parseGoAway,
} from '../src/index.js';
import { afterQueuedImmediates, deferred } from './support/deferred.js';
import { requestHead } from './support/exchange.js';
import { connectPair, createRawPeer, type Pair } from './support/mux-harness.js';
import { type ConsumeMode, openRecorded, StreamRecorder, writeBody } from './support/stream-recorder.js';

const KiB = 1024;
const small = { initialStreamWindow: 16 * KiB, initialSessionWindow: 64 * KiB, maxFrameSize: 16 * KiB };

const pairs: Pair[] = [];
async function pairFor(options: Parameters<typeof connectPair>[0]): Promise<Pair> {
  const pair = await connectPair(options);
  pairs.push(pair);
  return pair;
}
afterEach(() => {
  for (const pair of pairs.splice(0)) pair.dispose();
});

/** One stream at a time: openRecorded owns the agent's onStream callback while it waits. */
async function openMany(pair: Pair, count: number, mode: ConsumeMode) {
  const streams: { edge: StreamRecorder; agent: StreamRecorder }[] = [];
  for (let i = 0; i < count; i++) streams.push(await openRecorded(pair, mode));
  return streams;
}

/** A round trip on a fresh header-only stream: everything sent before it has been processed on both sides. */
async function roundTrip(pair: Pair): Promise<void> {
  const answered = deferred<StreamRecorder>();
  pair.agent.events.onStreamOpened = (stream) => {
    const recorder = new StreamRecorder(stream);
    recorder.onHead = () => stream.sendHeaders(requestHead('/pong'), true);
    answered.resolve(recorder);
  };
  const stream = pair.edge.session.openStream();
  const recorder = new StreamRecorder(stream);
  stream.sendHeaders(requestHead('/ping'), true);
  await recorder.ended.promise;
}

const windowUpdates = (pair: Pair, streamId: number) =>
  pair.agent.transport.sent.frames.filter(
    (f) => f.type === FrameType.WINDOW_UPDATE && f.streamId === streamId,
  );

describe('flow control between two sessions', () => {
  it('a large body never has more than the stream window unconsumed at the receiver', async () => {
    const pair = await pairFor({ settings: small });
    const { edge, agent } = await openRecorded(pair, 'next-turn');
    const body = randomBytes(1024 * KiB);
    await writeBody(edge, body, 10_000);
    await agent.ended.promise;
    expect(agent.body().equals(body)).toBe(true);
    expect(agent.maxUnconsumed).toBeLessThanOrEqual(small.initialStreamWindow);
    expect(edge.drains).toBeGreaterThan(0);
  });

  it('concurrent streams never have more than the session window unconsumed in total', async () => {
    const pair = await pairFor({ settings: small });
    // Six streams × 16 KiB of stream credit exceed the 64 KiB session window, so the session limit binds.
    const streams = await openMany(pair, 6, 'next-turn');
    let maxTotal = 0;
    for (const { agent } of streams) {
      agent.onChunk = () => {
        const total = streams.reduce((sum, s) => sum + s.agent.unconsumed, 0);
        maxTotal = Math.max(maxTotal, total);
      };
    }
    const bodies = streams.map(() => randomBytes(256 * KiB));
    await Promise.all(streams.map(({ edge }, i) => writeBody(edge, bodies[i]!, 12_000)));
    await Promise.all(streams.map(({ agent }) => agent.ended.promise));
    streams.forEach(({ agent }, i) => {
      expect(agent.body().equals(bodies[i]!)).toBe(true);
      expect(agent.maxUnconsumed).toBeLessThanOrEqual(small.initialStreamWindow);
    });
    expect(maxTotal).toBeGreaterThan(small.initialStreamWindow);
    expect(maxTotal).toBeLessThanOrEqual(small.initialSessionWindow);
  });

  it('write() returns false at the window and onDrain fires once the receiver consumes', async () => {
    const pair = await pairFor({ settings: small });
    const { edge, agent } = await openRecorded(pair, 'manual');
    const stream = edge.stream;
    expect(stream.write(Buffer.alloc(32 * KiB, 2))).toBe(false);
    const drained = edge.nextDrain();
    expect(stream.sendWindow).toBe(0);
    expect(stream.pendingBytes).toBe(16 * KiB);

    await agent.waitForBytes(16 * KiB);
    // Less than a quarter of the window consumed: no credit goes back yet.
    agent.stream.consume(4 * KiB - 1);
    await afterQueuedImmediates();
    expect(windowUpdates(pair, stream.id)).toHaveLength(0);
    expect(edge.drains).toBe(0);
    // A quarter reached: one WINDOW_UPDATE returns exactly what was consumed.
    agent.stream.consume(1);
    const update = await pair.agent.transport.sent.waitFor(
      (f) => f.type === FrameType.WINDOW_UPDATE && f.streamId === stream.id,
    );
    expect(update.payload.readUInt32BE(0)).toBe(4 * KiB);

    agent.consumeAll();
    await drained;
    expect(edge.drains).toBe(1);
    expect(stream.pendingBytes).toBe(0);
    await agent.waitForBytes(32 * KiB);
  });

  it('a receiver that never consumes stalls the sender at exactly the stream window', async () => {
    const pair = await pairFor({ settings: small });
    const { edge, agent } = await openRecorded(pair, 'manual');
    expect(edge.stream.write(Buffer.alloc(100 * KiB))).toBe(false);
    await agent.waitForBytes(16 * KiB);
    await roundTrip(pair);
    await roundTrip(pair);
    expect(agent.received).toBe(16 * KiB);
    expect(edge.stream.sendWindow).toBe(0);
    expect(edge.stream.pendingBytes).toBe(84 * KiB);
    expect(pair.edge.session.sessionSendWindow).toBe(48 * KiB);
    expect(windowUpdates(pair, edge.stream.id)).toHaveLength(0);
  });

  it('receivers that never consume stall the session at exactly the session window', async () => {
    const pair = await pairFor({ settings: { ...small, initialStreamWindow: 32 * KiB } });
    const streams = await openMany(pair, 3, 'manual');
    for (const { edge } of streams) edge.stream.write(Buffer.alloc(64 * KiB, 3));
    await roundTrip(pair);
    await roundTrip(pair);
    const total = () => streams.reduce((sum, s) => sum + s.agent.received, 0);
    expect(total()).toBe(64 * KiB);
    expect(pair.edge.session.sessionSendWindow).toBe(0);

    // Releasing the credit lets every stream finish.
    for (const { agent } of streams) agent.onChunk = () => agent.consumeAll();
    for (const { agent, edge } of streams) {
      agent.consumeAll();
      edge.stream.end();
    }
    await Promise.all(streams.map(({ agent }) => agent.ended.promise));
    expect(total()).toBe(3 * 64 * KiB);
  });

  it('write() returns false while the transport is congested and onDrain follows the flush', async () => {
    const pair = await pairFor({ highWaterMark: 1024 });
    const { edge, agent } = await openRecorded(pair, 'sync');
    expect(pair.edge.session.congested).toBe(false);
    expect(edge.stream.write(Buffer.alloc(4 * KiB))).toBe(false);
    expect(pair.edge.session.congested).toBe(true);
    await edge.nextDrain();
    expect(pair.edge.session.congested).toBe(false);
    await agent.waitForBytes(4 * KiB);
  });
});

describe('flow-control violations (raw peer)', () => {
  const helloFrom = (settings: Partial<ProtocolSettings>) =>
    encodeHello(
      { minVersion: 1, maxVersion: 1, settings: { ...defaultSettings, ...settings }, meta: {} },
      true,
    );
  const headers = (id: number) => encodeFrame(FrameType.HEADERS, 0, id, requestHead('/'));
  const data = (id: number, size: number) => encodeFrame(FrameType.DATA, 0, id, Buffer.alloc(size));

  async function expectFlowControlClose(
    peer: ReturnType<typeof createRawPeer>,
    streams: MuxStream[],
  ): Promise<void> {
    const error = await peer.events.closed.promise;
    expect(error).toBeInstanceOf(ProtocolError);
    expect(error).toMatchObject({
      code: ProtocolErrorCode.FLOW_CONTROL,
      protocolCode: ErrorCode.FLOW_CONTROL_ERROR,
    });
    const goAway = peer.sent.frames.find((f) => f.type === FrameType.GOAWAY);
    expect(parseGoAway(goAway!.payload).code).toBe(ErrorCode.FLOW_CONTROL_ERROR);
    expect(peer.closes[0]?.code).toBe(1002);
    for (const stream of streams) expect(stream.closed).toBe(true);
  }

  function agentUnderTest(settings: Partial<ProtocolSettings>) {
    const peer = createRawPeer('agent', settings);
    const streams: MuxStream[] = [];
    const resets: number[] = [];
    peer.events.onStreamOpened = (stream) => {
      streams.push(stream);
      new StreamRecorder(stream, 'manual').resetError.promise.then((e) => resets.push(e.protocolCode));
    };
    return { peer, streams, resets };
  }

  it('closes the session with FLOW_CONTROL_ERROR when a peer overruns a stream window', async () => {
    const { peer, streams, resets } = agentUnderTest(small);
    peer.feed(helloFrom(small), headers(1), data(1, 16 * KiB), data(1, 1));
    await expectFlowControlClose(peer, streams);
    await afterQueuedImmediates();
    expect(resets).toEqual([ErrorCode.SESSION_CLOSED]);
  });

  it('closes the session with FLOW_CONTROL_ERROR when a peer overruns the session window', async () => {
    const settings = {
      initialStreamWindow: 64 * KiB,
      initialSessionWindow: 16 * KiB,
      maxFrameSize: 16 * KiB,
    };
    const { peer, streams } = agentUnderTest(settings);
    peer.feed(helloFrom(settings), headers(1), headers(3), data(1, 16 * KiB), data(3, 1));
    await expectFlowControlClose(peer, streams);
  });

  it('closes the session with FLOW_CONTROL_ERROR when WINDOW_UPDATEs push a window past 2^31-1', async () => {
    const session = agentUnderTest(small);
    session.peer.feed(helloFrom(small), encodeWindowUpdate(0, MAX_WINDOW));
    await expectFlowControlClose(session.peer, []);

    const stream = agentUnderTest(small);
    stream.peer.feed(helloFrom(small), headers(1), encodeWindowUpdate(1, MAX_WINDOW));
    await expectFlowControlClose(stream.peer, stream.streams);
  });

  it('accepts DATA that exactly fills both windows', async () => {
    const { peer, streams } = agentUnderTest(small);
    peer.feed(helloFrom(small), headers(1), data(1, 16 * KiB), headers(3), data(3, 16 * KiB));
    expect(peer.session.closed).toBe(false);
    expect(streams).toHaveLength(2);
    peer.session.transportClosed();
  });
});
