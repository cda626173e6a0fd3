import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  defaultSettings,
  encodeFrame,
  encodeHello,
  FrameFlags,
  FrameType,
  PeerTimeoutError,
  PROBE_QUIET_MS,
  type ProtocolSettings,
} from '../src/index.js';
import { createRawPeer, type RawPeer } from './support/mux-harness.js';

// The liveness probe (PROTOCOL.md §7, "Probe"): a stream opened to a peer that has been quiet asks it for a
// sign of life, so a frozen agent fails the request that finds it within seconds, not after two heartbeat
// intervals. Fake timers and a fake performance clock: the probe is a matter of timeouts only.

afterEach(() => {
  vi.useRealTimers();
});

const HEARTBEAT_MS = 10_000;
const PROBE_TIMEOUT_MS = 2_000;

const peerHello = (settings: Partial<ProtocolSettings> = {}, ack = true): Buffer =>
  encodeHello({ minVersion: 1, maxVersion: 1, settings: { ...defaultSettings, ...settings }, meta: {} }, ack);
const pingFrame = (flags: number, fill: number) =>
  encodeFrame(FrameType.PING, flags, 0, Buffer.alloc(8, fill));

/** An edge session with both HELLOs out, the heartbeat long, the probe on (unless `probeTimeoutMs` says). */
async function readyEdge(probeTimeoutMs = PROBE_TIMEOUT_MS, skipPingWhenPinged = false): Promise<RawPeer> {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'performance'] });
  const peer = createRawPeer(
    'edge',
    { heartbeatIntervalMs: HEARTBEAT_MS },
    { probeTimeoutMs, skipPingWhenPinged },
  );
  peer.feed(peerHello({ heartbeatIntervalMs: HEARTBEAT_MS }, false));
  await peer.events.hello.promise;
  peer.session.sendHello({}, true);
  await peer.sent.waitFor((f) => f.type === FrameType.HELLO);
  return peer;
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** PINGs (not ACKs) the session sent so far, once what it queued has been written. */
async function pingsSent(peer: RawPeer): Promise<number> {
  await new Promise((resolve) => setImmediate(resolve));
  return peer.sent.frames.filter((f) => f.type === FrameType.PING && f.flags === 0).length;
}

describe('liveness probe', () => {
  it('a stream opened to a quiet peer sends a PING at once; no answer within the timeout ends the session', async () => {
    const peer = await readyEdge();
    vi.advanceTimersByTime(PROBE_QUIET_MS);
    peer.session.openStream();
    expect(await pingsSent(peer)).toBe(1);
    vi.advanceTimersByTime(PROBE_TIMEOUT_MS - 1);
    await nextTurn();
    expect(peer.session.closed).toBe(false);
    vi.advanceTimersByTime(1);
    await nextTurn(); // the verdict waits for this turn's reads
    expect(peer.session.closed).toBe(true);
    const error = await peer.events.closed.promise;
    expect(error).toBeInstanceOf(PeerTimeoutError);
    expect((error as PeerTimeoutError).code).toBe('TUNNEL2_ERR_PEER_TIMEOUT');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a peer that answers stays, and the next quiet spell is probed again', async () => {
    const peer = await readyEdge();
    vi.advanceTimersByTime(PROBE_QUIET_MS);
    peer.session.openStream();
    expect(await pingsSent(peer)).toBe(1);
    vi.advanceTimersByTime(PROBE_TIMEOUT_MS / 2);
    peer.feed(pingFrame(FrameFlags.ACK, 0xee)); // not the timed PING: no round-trip sample follows
    vi.advanceTimersByTime(PROBE_TIMEOUT_MS * 2);
    await nextTurn();
    expect(peer.session.closed).toBe(false);
    peer.session.openStream();
    expect(await pingsSent(peer)).toBe(2);
    peer.session.transportClosed();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a peer heard from within the quiet period is not pinged for a new stream until that period has passed', async () => {
    const peer = await readyEdge();
    vi.advanceTimersByTime(PROBE_QUIET_MS / 2);
    peer.feed(pingFrame(FrameFlags.ACK, 0xee)); // heard just now (not the timed PING)
    peer.session.openStream();
    peer.session.openStream(); // one probe per session, however many streams
    expect(await pingsSent(peer)).toBe(0);
    vi.advanceTimersByTime(PROBE_QUIET_MS - 1);
    expect(await pingsSent(peer)).toBe(0);
    // Still nothing from the peer a whole quiet period after it was last heard: now it is asked.
    vi.advanceTimersByTime(1);
    expect(await pingsSent(peer)).toBe(1);
    vi.advanceTimersByTime(PROBE_TIMEOUT_MS);
    await nextTurn();
    expect(peer.session.closed).toBe(true);
  });

  it('an answer that arrives in the same turn as the timeout (an event loop that stalled) keeps the session', async () => {
    const peer = await readyEdge();
    vi.advanceTimersByTime(PROBE_QUIET_MS);
    peer.session.openStream();
    expect(await pingsSent(peer)).toBe(1);
    // The timer is due, and the ACK was sitting in the socket: read before the verdict.
    vi.advanceTimersByTime(PROBE_TIMEOUT_MS * 3);
    peer.feed(pingFrame(FrameFlags.ACK, 0xee));
    await nextTurn();
    expect(peer.session.closed).toBe(false);
    peer.session.transportClosed();
  });

  it('a busy peer is never probed: anything it sends counts', async () => {
    const peer = await readyEdge();
    // Within one heartbeat interval, so that only a probe could have pinged.
    for (let i = 0; i < (HEARTBEAT_MS / PROBE_QUIET_MS) * 2 - 1; i++) {
      vi.advanceTimersByTime(PROBE_QUIET_MS / 2);
      peer.feed(pingFrame(0, i)); // its own traffic (here: its PINGs) keeps arriving
      peer.session.openStream();
    }
    expect(await pingsSent(peer)).toBe(0);
    expect(peer.session.closed).toBe(false);
    peer.session.transportClosed();
  });

  it('is off by default (probeTimeoutMs 0): a stream to a quiet peer waits for the heartbeat', async () => {
    const peer = await readyEdge(0);
    vi.advanceTimersByTime(PROBE_QUIET_MS * 5);
    peer.session.openStream();
    expect(await pingsSent(peer)).toBe(0);
    vi.advanceTimersByTime(PROBE_TIMEOUT_MS * 2);
    await nextTurn();
    expect(peer.session.closed).toBe(false);
    peer.session.transportClosed();
  });
});

describe('a heartbeat that leaves out its PING when the peer sent one (skipPingWhenPinged)', () => {
  it('sends only ACKs while the peer pings every interval, and the session lives', async () => {
    const peer = await readyEdge(0, true);
    for (let i = 0; i < 10; i++) {
      vi.advanceTimersByTime(HEARTBEAT_MS / 2);
      peer.feed(pingFrame(0, i)); // the peer's heartbeat, half-way through each of ours
      vi.advanceTimersByTime(HEARTBEAT_MS / 2);
    }
    expect(await pingsSent(peer)).toBe(0);
    expect(
      peer.sent.frames.filter((f) => f.type === FrameType.PING && f.flags === FrameFlags.ACK),
    ).toHaveLength(10);
    expect(peer.session.closed).toBe(false);
    peer.session.transportClosed();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('pings in an interval in which the peer sent no PING, and still ends a silent peer after two intervals', async () => {
    const peer = await readyEdge(0, true);
    vi.advanceTimersByTime(HEARTBEAT_MS / 2);
    peer.feed(pingFrame(FrameFlags.ACK, 0xee)); // heard, but not pinged: our PING is still due
    vi.advanceTimersByTime(HEARTBEAT_MS / 2);
    expect(await pingsSent(peer)).toBe(1);
    vi.advanceTimersByTime(HEARTBEAT_MS); // first silent interval
    expect(peer.session.closed).toBe(false);
    vi.advanceTimersByTime(HEARTBEAT_MS); // second
    expect(peer.session.closed).toBe(true);
    expect(await peer.events.closed.promise).toBeInstanceOf(PeerTimeoutError);
  });
});
