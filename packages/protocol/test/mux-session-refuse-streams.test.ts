import { describe, expect, it } from 'vitest';
import {
  ErrorCode,
  encodeFrame,
  encodeHelloPayload,
  encodeRequestHead,
  FrameFlags,
  FrameType,
  MuxSession,
  resolveSettings,
} from '../src/index.js';
import { FrameLog } from './support/mux-harness.js';

describe('a session that serves no streams', () => {
  it('refuses streams its peer opens instead of keeping them open forever', async () => {
    const sent = new FrameLog();
    // The edge's handler has no onStream: agents are not meant to open streams.
    const session = new MuxSession({
      role: 'edge',
      settings: { heartbeatIntervalMs: 0 },
      transport: {
        send: (message, done) => {
          sent.add(Buffer.from(message));
          setImmediate(done);
        },
        close: () => {},
      },
      handler: { onHello: () => {}, onClose: () => {} },
    });
    const hello = encodeHelloPayload({
      minVersion: 1,
      maxVersion: 1,
      settings: resolveSettings({ heartbeatIntervalMs: 0 }),
      meta: {},
    });
    session.receive(encodeFrame(FrameType.HELLO, 0, 0, hello));
    const head = encodeRequestHead({ method: 'GET', target: '/', headers: [] }, 65_536);
    session.receive(encodeFrame(FrameType.HEADERS, FrameFlags.END_STREAM, 2, head));
    const reset = await sent.waitFor((f) => f.type === FrameType.RESET);
    expect(reset.streamId).toBe(2);
    expect(reset.payload.readUInt32BE(0)).toBe(ErrorCode.REFUSED_STREAM);
    expect(session.streams.size).toBe(0);
    expect(session.closed).toBe(false);
  });
});
