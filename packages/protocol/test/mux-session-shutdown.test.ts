import { afterEach, describe, expect, it } from 'vitest';
import {
  defaultSettings,
  ErrorCode,
  encodeHello,
  type FrameTransport,
  FrameType,
  MuxSession,
  ProtocolErrorCode,
  parseGoAway,
} from '../src/index.js';
import { deferred } from './support/deferred.js';
import { requestHead } from './support/exchange.js';
import { connectPair, type Pair, SessionEvents } from './support/mux-harness.js';
import { StreamRecorder, writeBody } from './support/stream-recorder.js';

const pairs: Pair[] = [];
async function pairFor(): Promise<Pair> {
  const pair = await connectPair();
  pairs.push(pair);
  return pair;
}
afterEach(() => {
  for (const pair of pairs.splice(0)) pair.dispose();
});

/** Opens `count` streams from the edge (headers sent, not ended) and waits until the agent has them all. */
async function openStreams(
  pair: Pair,
  count: number,
): Promise<{ edge: StreamRecorder[]; agent: StreamRecorder[] }> {
  const agent: StreamRecorder[] = [];
  const all = deferred();
  pair.agent.events.onStreamOpened = (stream) => {
    agent.push(new StreamRecorder(stream));
    if (agent.length === count) all.resolve();
  };
  const edge = Array.from({ length: count }, () => {
    const recorder = new StreamRecorder(pair.edge.session.openStream());
    recorder.stream.sendHeaders(requestHead('/open'), false);
    return recorder;
  });
  await all.promise;
  return { edge, agent };
}

describe('GOAWAY', () => {
  it('refuses new streams and lets open ones finish', async () => {
    const pair = await pairFor();
    const { edge, agent } = await openStreams(pair, 1);
    const [open] = edge;
    const [served] = agent;

    pair.agent.session.goAway(ErrorCode.GOING_AWAY, 'restarting');
    // Opened before the GOAWAY arrives: the agent has not seen it, so it will not be served.
    const late = new StreamRecorder(pair.edge.session.openStream());
    late.stream.sendHeaders(requestHead('/late'), true);

    expect(await pair.edge.events.goAway.promise).toEqual({
      lastStreamId: open!.stream.id,
      code: ErrorCode.GOING_AWAY,
      reason: 'restarting',
    });
    expect((await late.resetError.promise).protocolCode).toBe(ErrorCode.REFUSED_STREAM);
    expect(pair.edge.session.draining).toBe(true);
    expect(pair.agent.session.draining).toBe(true);
    expect(() => pair.edge.session.openStream()).toThrow(
      expect.objectContaining({ code: ProtocolErrorCode.SESSION_CLOSED, protocolCode: ErrorCode.GOING_AWAY }),
    );
    expect(() => pair.agent.session.openStream()).toThrow(
      expect.objectContaining({ code: ProtocolErrorCode.SESSION_CLOSED }),
    );

    // The open stream runs to completion in both directions.
    await writeBody(open!, Buffer.from('request body'), 4);
    await served!.ended.promise;
    served!.stream.sendHeaders(requestHead('/response'), false);
    await writeBody(served!, Buffer.from('response body'), 5);
    await open!.ended.promise;
    expect(served!.body().toString()).toBe('request body');
    expect(open!.body().toString()).toBe('response body');
    expect(pair.edge.session.streams.size).toBe(0);

    // The agent refused the late stream on the wire too, and never handed it to its owner.
    const refusal = await pair.agent.transport.sent.waitFor((f) => f.type === FrameType.RESET);
    expect(refusal.streamId).toBe(late.stream.id);
    expect(refusal.payload.readUInt32BE(0)).toBe(ErrorCode.REFUSED_STREAM);
    expect(agent).toHaveLength(1);

    pair.agent.session.close();
    expect(await pair.edge.events.closed.promise).toBeUndefined();
    expect(await pair.agent.events.closed.promise).toBeUndefined();
  });

  it('goAway() is sent once', async () => {
    const pair = await pairFor();
    pair.edge.session.goAway();
    pair.edge.session.goAway(ErrorCode.INTERNAL_ERROR, 'again');
    await pair.agent.events.goAway.promise;
    expect(pair.edge.transport.sent.frames.filter((f) => f.type === FrameType.GOAWAY)).toHaveLength(1);
  });
});

describe('idle', () => {
  it('onIdle fires when the last open stream closes, not when the session closes', async () => {
    const pair = await pairFor();
    const { edge, agent } = await openStreams(pair, 2);
    expect(pair.edge.events.idleCount).toBe(0);
    edge[0]!.stream.reset(ErrorCode.CANCEL);
    expect(pair.edge.events.idleCount).toBe(0);
    edge[1]!.stream.reset(ErrorCode.CANCEL);
    expect(pair.edge.events.idleCount).toBe(1);
    await Promise.all(agent.map((r) => r.resetError.promise));
    expect(pair.agent.events.idleCount).toBe(1);
    const third = await openStreams(pair, 1);
    pair.edge.session.transportClosed();
    await third.edge[0]!.resetError.promise;
    expect(pair.edge.events.idleCount).toBe(1);
  });
});

describe('closing', () => {
  it('transportClosed resets every open stream with SESSION_CLOSED and reports a clean close', async () => {
    const pair = await pairFor();
    const { edge, agent } = await openStreams(pair, 3);
    pair.edge.session.transportClosed();
    pair.agent.session.transportClosed();
    for (const recorder of [...edge, ...agent]) {
      const error = await recorder.resetError.promise;
      expect(error.protocolCode).toBe(ErrorCode.SESSION_CLOSED);
      expect(recorder.stream.closed).toBe(true);
      expect(recorder.stream.write(Buffer.from('x'))).toBe(false);
    }
    expect(await pair.edge.events.closed.promise).toBeUndefined();
    expect(pair.edge.session.streams.size).toBe(0);
    expect(pair.edge.session.ready).toBe(false);
    expect(() => pair.edge.session.openStream()).toThrow(
      expect.objectContaining({ code: ProtocolErrorCode.SESSION_CLOSED }),
    );
  });

  it('close() sends GOAWAY with the code, then the peer sees the transport close', async () => {
    const pair = await pairFor();
    const { agent } = await openStreams(pair, 2);
    const order: string[] = [];
    pair.agent.events.goAway.promise.then(() => order.push('goaway'));
    pair.agent.events.closed.promise.then(() => order.push('closed'));
    pair.edge.session.close(ErrorCode.INTERNAL_ERROR, 'edge is broken');
    expect(pair.edge.session.closed).toBe(true);
    expect(pair.edge.transport.closedWith).toEqual({ code: 1002, reason: 'edge is broken' });
    expect(await pair.agent.events.goAway.promise).toMatchObject({ code: ErrorCode.INTERNAL_ERROR });
    expect(await pair.agent.events.closed.promise).toBeUndefined();
    expect(order).toEqual(['goaway', 'closed']);
    for (const recorder of agent) {
      expect((await recorder.resetError.promise).protocolCode).toBe(ErrorCode.SESSION_CLOSED);
    }
  });

  it('a clean close() uses WebSocket close code 1000', async () => {
    const pair = await pairFor();
    pair.agent.session.close();
    expect(pair.agent.transport.closedWith).toEqual({ code: 1000, reason: 'closing' });
    const goAway = pair.agent.transport.sent.frames.find((f) => f.type === FrameType.GOAWAY);
    expect(parseGoAway(goAway!.payload)).toEqual({
      lastStreamId: 0,
      code: ErrorCode.NO_ERROR,
      reason: 'closing',
    });
  });

  it('a failed send closes the session with that error', async () => {
    const failure = new Error('socket gone');
    const transport: FrameTransport = {
      send: (_message, done) => setImmediate(() => done(failure)),
      close: () => {},
    };
    const events = new SessionEvents();
    const session = new MuxSession({
      role: 'agent',
      transport,
      handler: events,
      settings: { heartbeatIntervalMs: 0 },
    });
    session.receive(
      encodeHello({ minVersion: 1, maxVersion: 1, settings: { ...defaultSettings }, meta: {} }, true),
    );
    session.ping();
    expect(await events.closed.promise).toBe(failure);
    expect(session.closed).toBe(true);
  });
});
