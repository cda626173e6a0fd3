import { describe, expect, it } from 'vitest';
import {
  ErrorCode,
  encodeFrame,
  encodeHelloPayload,
  encodeRequestHead,
  type FloodLimits,
  FrameFlags,
  FrameType,
  MuxSession,
  OutboundBatch,
  ProtocolError,
  ProtocolErrorCode,
  resolveSettings,
} from '../src/index.js';
import { FrameLog, SessionEvents } from './support/mux-harness.js';

/**
 * An edge-side session whose peer is the test. `reading: false` is a peer that never reads its socket:
 * the transport takes each message and never reports it flushed, as a WebSocket whose kernel buffer is full.
 */
function floodTarget(reading: boolean, floodLimits: Partial<FloodLimits> = {}) {
  const sent = new FrameLog();
  const closes: { code: number; reason: string }[] = [];
  const events = new SessionEvents();
  const session = new MuxSession({
    role: 'edge',
    settings: { heartbeatIntervalMs: 0 },
    floodLimits,
    transport: {
      send(message, done) {
        sent.add(Buffer.from(message));
        if (reading) setImmediate(done);
      },
      close(code, reason) {
        closes.push({ code, reason });
      },
    },
    // As the edge's: no onStream, so every stream the peer opens is refused.
    handler: { onHello: (h, ack) => events.onHello(h, ack), onClose: (error) => events.onClose(error) },
  });
  const hello = encodeHelloPayload({
    minVersion: 1,
    maxVersion: 1,
    settings: resolveSettings({ heartbeatIntervalMs: 0 }),
    meta: {},
  });
  session.receive(encodeFrame(FrameType.HELLO, 0, 0, hello));
  return { session, sent, closes, events };
}

function ping(n: number): Buffer {
  const payload = Buffer.alloc(8);
  payload.writeUInt32BE(n, 4);
  return encodeFrame(FrameType.PING, 0, 0, payload);
}

/** One event-loop turn per message, so the session flushes between them (as it would between socket reads). */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

async function expectFloodClose(target: ReturnType<typeof floodTarget>): Promise<void> {
  const error = await target.events.closed.promise;
  expect(error).toBeInstanceOf(ProtocolError);
  expect((error as ProtocolError).code).toBe(ProtocolErrorCode.FLOOD);
  expect((error as ProtocolError).protocolCode).toBe(ErrorCode.ENHANCE_YOUR_CALM);
  expect(target.session.closed).toBe(true);
  expect(target.closes[0]?.code).toBe(1002);
  const goAway = await target.sent.waitFor((f) => f.type === FrameType.GOAWAY);
  expect(goAway.payload.readUInt32BE(4)).toBe(ErrorCode.ENHANCE_YOUR_CALM);
}

describe('flood protection: answers the peer does not read', () => {
  it('closes the session with ENHANCE_YOUR_CALM when PING ACKs pile up unread', async () => {
    const target = floodTarget(false, { maxQueuedAnswers: 100 });
    // One PING per turn: every ACK is flushed to the transport, which never confirms it.
    for (let i = 0; i < 200 && !target.session.closed; i++) {
      target.session.receive(ping(i));
      await nextTurn();
    }
    await expectFloodClose(target);
    // The bound held: no more ACKs than the limit were ever handed to the transport.
    const acks = target.sent.frames.filter((f) => f.type === FrameType.PING && f.flags === FrameFlags.ACK);
    expect(acks.length).toBeLessThanOrEqual(100);
  });

  it('also counts the answers still in the batch: many PINGs in one message trip it at once', async () => {
    const target = floodTarget(false, { maxQueuedAnswers: 100 });
    const pings = Array.from({ length: 10_000 }, (_, i) => ping(i));
    target.session.receive(Buffer.concat(pings));
    await expectFloodClose(target);
    const acks = target.sent.frames.filter((f) => f.type === FrameType.PING && f.flags === FrameFlags.ACK);
    expect(acks.length).toBeLessThanOrEqual(100);
  });

  it('closes the session when the RESETs refusing streams the peer opens pile up unread', async () => {
    const target = floodTarget(false, { maxQueuedAnswers: 100 });
    const head = encodeRequestHead({ method: 'GET', target: '/', headers: [] }, 65_536);
    // The edge serves no streams: every HEADERS on an even id is refused with a RESET.
    for (let id = 2; id <= 400 && !target.session.closed; id += 2) {
      target.session.receive(encodeFrame(FrameType.HEADERS, FrameFlags.END_STREAM, id, head));
      await nextTurn();
    }
    await expectFloodClose(target);
    const resets = target.sent.frames.filter((f) => f.type === FrameType.RESET);
    expect(resets.length).toBeLessThanOrEqual(100);
  });

  it('keeps serving a peer that sends many PINGs and reads the answers', async () => {
    const target = floodTarget(true, { maxQueuedAnswers: 100 });
    for (let i = 0; i < 1000; i++) {
      target.session.receive(Buffer.concat([ping(2 * i), ping(2 * i + 1)]));
      await nextTurn();
    }
    await target.sent.waitFor((f) => f.type === FrameType.PING && f.payload.readUInt32BE(4) === 1999);
    expect(target.session.closed).toBe(false);
  });

  it("never counts what a side sends on its own account: a slow peer's session survives 2,000 RESETs of the edge's own streams", async () => {
    const target = floodTarget(false, { maxQueuedAnswers: 100 });
    // The edge cancels streams it opened (clients that went away) while the agent's socket is backed up:
    // those RESETs are bounded by the edge's own streams, and an honest, slow agent must not be cut off.
    for (let round = 0; round < 2; round++) {
      const streams = Array.from({ length: 1000 }, () => target.session.openStream());
      for (const stream of streams) stream.reset(ErrorCode.CANCEL);
      await nextTurn();
    }
    expect(target.sent.frames.filter((f) => f.type === FrameType.RESET).length).toBe(2000);
    expect(target.session.closed).toBe(false);
    // Answers still count: the peer's PINGs trip the bound as before.
    target.session.receive(Buffer.concat(Array.from({ length: 101 }, (_, i) => ping(i))));
    await expectFloodClose(target);
  });

  it('defaults to 1000 queued answers', async () => {
    const target = floodTarget(false);
    target.session.receive(Buffer.concat(Array.from({ length: 1000 }, (_, i) => ping(i))));
    await nextTurn();
    expect(target.session.closed).toBe(false);
    target.session.receive(ping(1000));
    await expectFloodClose(target);
  });
});

describe('flood protection: frames that carry nothing', () => {
  it('closes the session after too many consecutive empty DATA frames', async () => {
    const events = new SessionEvents();
    const sent = new FrameLog();
    const session = new MuxSession({
      role: 'agent',
      settings: { heartbeatIntervalMs: 0 },
      floodLimits: { maxConsecutiveEmptyFrames: 10 },
      transport: {
        send(message, done) {
          sent.add(Buffer.from(message));
          setImmediate(done);
        },
        close: () => {},
      },
      handler: events,
    });
    events.onStreamOpened = (stream) => {
      stream.handler = {
        onHeaders: () => {},
        onData: () => {},
        onEnd: () => {},
        onReset: () => {},
        onDrain: () => {},
      };
    };
    const hello = encodeHelloPayload({
      minVersion: 1,
      maxVersion: 1,
      settings: resolveSettings({ heartbeatIntervalMs: 0 }),
      meta: {},
    });
    session.receive(encodeFrame(FrameType.HELLO, FrameFlags.ACK, 0, hello));
    const head = encodeRequestHead({ method: 'POST', target: '/', headers: [] }, 65_536);
    session.receive(encodeFrame(FrameType.HEADERS, 0, 1, head));
    const empty = encodeFrame(FrameType.DATA, 0, 1, Buffer.alloc(0));
    const one = encodeFrame(FrameType.DATA, 0, 1, Buffer.alloc(1));
    // Ten empty frames, then one with a byte: the count starts over, nothing happens.
    session.receive(Buffer.concat([...Array.from({ length: 10 }, () => empty), one]));
    expect(session.closed).toBe(false);
    session.receive(Buffer.concat(Array.from({ length: 11 }, () => empty)));
    const error = await events.closed.promise;
    expect((error as ProtocolError).code).toBe(ProtocolErrorCode.FLOOD);
    expect((error as ProtocolError).protocolCode).toBe(ErrorCode.ENHANCE_YOUR_CALM);
  });
});

describe('flood protection: settings', () => {
  it('rejects invalid limits with a typed error naming the setting', () => {
    const make = (floodLimits: Partial<FloodLimits>) => () =>
      new MuxSession({
        role: 'edge',
        floodLimits,
        transport: { send: () => {}, close: () => {} },
        handler: { onHello: () => {}, onClose: () => {} },
      });
    expect(make({ maxQueuedAnswers: 0 })).toThrow(/maxQueuedAnswers/);
    expect(make({ maxConsecutiveEmptyFrames: -1 })).toThrow(/maxConsecutiveEmptyFrames/);
    expect(make({ maxQueuedAnswers: 1.5 })).toThrow(
      expect.objectContaining({ code: ProtocolErrorCode.INVALID_SETTING }),
    );
  });
});

describe('OutboundBatch memory under a peer that does not read', () => {
  it('does not pin a message-sized buffer for a message of a few bytes', () => {
    const batch = new OutboundBatch(256 * 1024);
    const held: Buffer[] = [];
    for (let i = 0; i < 10; i++) {
      batch.add(FrameType.PING, FrameFlags.ACK, 0, Buffer.alloc(8));
      // Never released: the transport still holds every message.
      batch.take((message) => held.push(message));
    }
    // Small messages share Node's allocation pool; before, each held a 256 KiB buffer of its own.
    const backing = new Set(held.map((message) => message.buffer));
    let pinned = 0;
    for (const buffer of backing) pinned += buffer.byteLength;
    expect(pinned).toBeLessThan(256 * 1024);
  });
});
