import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  defaultSettings,
  ErrorCode,
  encodeFrame,
  encodeHello,
  FrameFlags,
  FrameType,
  PeerTimeoutError,
  ProtocolError,
  ProtocolErrorCode,
  type ProtocolSettings,
  parseGoAway,
} from '../src/index.js';
import { hex } from './support/bytes.js';
import { createPair, createRawPeer, type Pair } from './support/mux-harness.js';

const pairs: Pair[] = [];
afterEach(() => {
  for (const pair of pairs.splice(0)) pair.dispose();
  vi.useRealTimers();
});

const peerHello = (settings: Partial<ProtocolSettings> = {}, ack = true): Buffer =>
  encodeHello({ minVersion: 1, maxVersion: 1, settings: { ...defaultSettings, ...settings }, meta: {} }, ack);
const ping = (flags: number, fill: number) => encodeFrame(FrameType.PING, flags, 0, Buffer.alloc(8, fill));

describe('HELLO exchange', () => {
  it('the agent says HELLO first, the edge answers with ACK, each applies the other’s settings', async () => {
    const pair = createPair({
      edgeSettings: { maxConcurrentStreams: 7, initialSessionWindow: 100_000 },
      agentSettings: { initialStreamWindow: 20_000, maxFrameSize: 32_768 },
    });
    pairs.push(pair);
    const { edge, agent } = pair;
    edge.events.afterHello = (_hello, ack) => {
      if (!ack) edge.session.sendHello({ session: 'abc', urls: ['https://abc.example'] }, true);
    };
    expect(edge.session.ready).toBe(false);
    // Until the peer's HELLO, the peer allows no streams.
    expect(() => edge.session.openStream()).toThrow(
      expect.objectContaining({ code: ProtocolErrorCode.TOO_MANY_STREAMS }),
    );

    agent.session.sendHello({ agent: 'v1' }, false);
    const atEdge = await edge.events.hello.promise;
    expect(atEdge.ack).toBe(false);
    expect(atEdge.hello.meta).toEqual({ agent: 'v1' });
    expect(atEdge.hello.settings).toEqual(agent.session.localSettings);

    const atAgent = await agent.events.hello.promise;
    expect(atAgent.ack).toBe(true);
    expect(atAgent.hello.meta).toEqual({ session: 'abc', urls: ['https://abc.example'] });
    expect(agent.session.peerSettings).toEqual(edge.session.localSettings);
    expect(edge.session.peerSettings).toEqual(agent.session.localSettings);
    expect(agent.session.sessionSendWindow).toBe(100_000);
    expect(edge.session.sessionSendWindow).toBe(defaultSettings.initialSessionWindow);
    expect(edge.session.ready && agent.session.ready).toBe(true);

    const first = (frames: { type: number; flags: number; streamId: number }[]) => frames[0];
    expect(first(agent.transport.sent.frames)).toMatchObject({
      type: FrameType.HELLO,
      flags: 0,
      streamId: 0,
    });
    expect(first(edge.transport.sent.frames)).toMatchObject({ type: FrameType.HELLO, flags: FrameFlags.ACK });
  });

  it('treats any frame other than HELLO or GOAWAY before HELLO as a protocol error', async () => {
    const peer = createRawPeer('agent');
    peer.feed(ping(0, 1));
    const error = await peer.events.closed.promise;
    expect(error).toBeInstanceOf(ProtocolError);
    expect((error as ProtocolError).code).toBe(ProtocolErrorCode.MALFORMED_FRAME);
    expect((error as ProtocolError).protocolCode).toBe(ErrorCode.PROTOCOL_ERROR);
    const goAway = peer.sent.frames.find((f) => f.type === FrameType.GOAWAY);
    expect(parseGoAway(goAway!.payload).code).toBe(ErrorCode.PROTOCOL_ERROR);
    expect(peer.closes).toEqual([{ code: 1002, reason: expect.stringContaining('PROTOCOL_ERROR') }]);
  });

  it('accepts GOAWAY before HELLO', async () => {
    const peer = createRawPeer('agent');
    peer.feed(encodeFrame(FrameType.GOAWAY, 0, 0, Buffer.alloc(8)));
    expect(await peer.events.goAway.promise).toEqual({ lastStreamId: 0, code: 0, reason: '' });
    expect(peer.session.closed).toBe(false);
    peer.session.transportClosed();
  });

  it('closes the session on a second HELLO', async () => {
    const peer = createRawPeer('agent');
    peer.feed(peerHello());
    await peer.events.hello.promise;
    peer.feed(peerHello());
    expect(await peer.events.closed.promise).toMatchObject({ code: ProtocolErrorCode.MALFORMED_FRAME });
  });

  it('closes the session on a HELLO with an invalid setting', async () => {
    const peer = createRawPeer('agent');
    // HELLO with one setting: MAX_FRAME_SIZE = 1024, below the 16 KiB minimum.
    peer.feed(encodeFrame(FrameType.HELLO, 1, 0, hex('0001 0001 0001 0002 00000400')));
    expect(await peer.events.closed.promise).toMatchObject({ code: ProtocolErrorCode.INVALID_SETTING });
  });

  it('answers PING with a PING ACK carrying the same payload, and ignores unknown frame types', async () => {
    const peer = createRawPeer('agent');
    peer.feed(peerHello(), encodeFrame(0x2a, 0, 9, Buffer.from('?')), ping(0, 0xab));
    const pong = await peer.sent.waitFor((f) => f.type === FrameType.PING);
    expect(pong.flags).toBe(FrameFlags.ACK);
    expect(pong.payload).toEqual(Buffer.alloc(8, 0xab));
    peer.feed(ping(FrameFlags.ACK, 1));
    expect(peer.session.closed).toBe(false);
    peer.session.transportClosed();
  });
});

describe('heartbeat', () => {
  const interval = 1000;

  it('closes a silent session with a PeerTimeoutError after two silent intervals', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const peer = createRawPeer('agent', { heartbeatIntervalMs: interval });
    peer.session.sendHello({}, false); // the heartbeat runs once both HELLOs are out
    // The shorter of the two intervals wins.
    peer.feed(peerHello({ heartbeatIntervalMs: 5 * interval }));

    vi.advanceTimersByTime(interval); // the HELLO counted as traffic: not silent yet
    await peer.sent.waitFor((f) => f.type === FrameType.PING && f.flags === 0);
    vi.advanceTimersByTime(interval); // first silent interval
    expect(peer.session.closed).toBe(false);
    vi.advanceTimersByTime(interval); // second silent interval
    expect(peer.session.closed).toBe(true);

    const error = await peer.events.closed.promise;
    expect(error).toBeInstanceOf(PeerTimeoutError);
    expect((error as PeerTimeoutError).code).toBe('TUNNEL2_ERR_PEER_TIMEOUT');
    expect(peer.sent.frames.filter((f) => f.type === FrameType.PING)).toHaveLength(2);
    expect(peer.sent.frames.at(-1)?.type).toBe(FrameType.GOAWAY);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('keeps a session alive while the peer answers', () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    // Our heartbeat is off; the peer's interval applies.
    const peer = createRawPeer('agent', { heartbeatIntervalMs: 0 });
    peer.session.sendHello({}, false);
    peer.feed(peerHello({ heartbeatIntervalMs: interval }));
    for (let i = 0; i < 10; i++) {
      vi.advanceTimersByTime(interval);
      peer.feed(ping(FrameFlags.ACK, i));
    }
    expect(peer.session.closed).toBe(false);
    peer.session.transportClosed();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('runs no timer when both sides disable the heartbeat', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const peer = createRawPeer('agent', { heartbeatIntervalMs: 0 });
    peer.session.sendHello({}, false);
    peer.feed(peerHello({ heartbeatIntervalMs: 0 }));
    await peer.events.hello.promise;
    expect(vi.getTimerCount()).toBe(0);
    peer.session.transportClosed();
  });

  it('an edge that answers inside onHello starts one heartbeat, and lives while the agent pings', async () => {
    // The usual single-tunnel edge answers synchronously from onHello: sendHello and then onHello's own
    // tail both saw both HELLOs out. A second heartbeat that nobody fed closed every session after two
    // intervals (regression).
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const peer = createRawPeer('edge', { heartbeatIntervalMs: interval });
    peer.events.afterHello = (_hello, ack) => {
      if (!ack) peer.session.sendHello({}, true);
    };
    peer.feed(peerHello({ heartbeatIntervalMs: interval }, false));
    await peer.events.hello.promise;
    expect(vi.getTimerCount()).toBe(1);
    for (let i = 0; i < 10; i++) {
      vi.advanceTimersByTime(interval);
      peer.feed(ping(0, i));
    }
    expect(peer.session.closed).toBe(false);
    peer.session.transportClosed();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('sends nothing before its own HELLO when the answer comes after onHello (claims take a while)', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const peer = createRawPeer('edge', { heartbeatIntervalMs: interval });
    peer.feed(peerHello({ heartbeatIntervalMs: interval }));
    await peer.events.hello.promise;
    vi.advanceTimersByTime(interval * 1.5);
    expect(vi.getTimerCount()).toBe(0);
    expect(peer.sent.frames).toHaveLength(0);
    peer.session.sendHello({}, true);
    await peer.sent.waitFor((f) => f.type === FrameType.HELLO);
    expect(peer.sent.frames[0]?.type).toBe(FrameType.HELLO);
    expect(vi.getTimerCount()).toBe(1);
    peer.session.transportClosed();
  });
});
