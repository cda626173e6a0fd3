import { MuxSession, type MuxStream, WindowBudget } from '@tunnel2/protocol';
import { describe, expect, it } from 'vitest';
import {
  LINK_GROWTH_BUDGET,
  LINK_HEARTBEAT_INTERVAL_MS,
  LINK_MAX_STREAMS,
  LINK_SESSION_WINDOW,
  LINK_STREAM_WINDOW,
  linkSessionOptions,
} from '../src/cluster/link/link-settings.js';
import { handlerWith, linkPair, turnsUntil } from './support/link-pair.js';

const noHandler = { onHello: () => {}, onClose: () => {} };

describe('linkSessionOptions', () => {
  it("a link session's window growth draws on the edge's budget, as an agent session's does", () => {
    const edgeBudget = new WindowBudget(1024 * 1024);
    const session = new MuxSession({
      ...linkSessionOptions('edge', {}, edgeBudget),
      transport: { send: () => {}, close: () => {} },
      handler: noHandler,
    });
    expect(session.localSettings.maxConcurrentStreams).toBe(LINK_MAX_STREAMS);
    expect(session.localSettings.initialSessionWindow).toBe(LINK_SESSION_WINDOW);
    // Growth the link's streams take leaves the edge's budget, and stops where the edge's ends.
    expect(session.windowBudget.take(768 * 1024)).toBe(768 * 1024);
    expect(edgeBudget.available).toBe(256 * 1024);
    expect(session.windowBudget.take(1024 * 1024)).toBe(256 * 1024);
    session.windowBudget.give(1024 * 1024);
    expect(edgeBudget.used).toBe(0);
    session.transportClosed();
  });

  it('heartbeats every 10 s at the least, not at the 3 s an edge announces to agents (off stays off)', () => {
    const budget = new WindowBudget(0);
    // The edge's own protocol settings carry its 3 s agent heartbeat (edge-options.ts).
    expect(
      linkSessionOptions('edge', { heartbeatIntervalMs: 3_000 }, budget).settings.heartbeatIntervalMs,
    ).toBe(LINK_HEARTBEAT_INTERVAL_MS);
    expect(linkSessionOptions('edge', {}, budget).settings.heartbeatIntervalMs).toBe(
      LINK_HEARTBEAT_INTERVAL_MS,
    );
    expect(
      linkSessionOptions('edge', { heartbeatIntervalMs: 60_000 }, budget).settings.heartbeatIntervalMs,
    ).toBe(60_000);
    expect(linkSessionOptions('edge', { heartbeatIntervalMs: 0 }, budget).settings.heartbeatIntervalMs).toBe(
      0,
    );
  });

  it('sizes the session window so that streams nobody reads can never fill it', () => {
    const options = linkSessionOptions('edge', { initialStreamWindow: 4 * 1024 * 1024 }, new WindowBudget(0));
    // An edge configured with large stream windows keeps the link's: the bound below is the link's own.
    expect(options.settings.initialStreamWindow).toBe(LINK_STREAM_WINDOW);
    expect(options.sessionWindowBudget).toBe(LINK_GROWTH_BUDGET);
    // What a sender may have outstanding: every stream's window full and unread, all the growth held, and
    // the consumed bytes whose session credit is still being batched (a quarter of the window).
    const outstanding = LINK_MAX_STREAMS * LINK_STREAM_WINDOW + LINK_GROWTH_BUDGET + LINK_SESSION_WINDOW / 4;
    // What it is granted: the initial session window, plus the growth grant after HELLO.
    expect(outstanding).toBeLessThan(LINK_SESSION_WINDOW + LINK_GROWTH_BUDGET);
  });

  it('gives the last stream its whole window when every other stream is full of unread bytes', async () => {
    // The ingress opens streams and reads nothing; the holder answers each with more than its window.
    const received = new Map<number, number>();
    const body = Buffer.alloc(LINK_STREAM_WINDOW * 2);
    const pair = await linkPair((stream) => {
      stream.handler = { ...handlerWith(), onHeaders: () => stream.write(body) };
    });
    try {
      const open = (): MuxStream => {
        const stream = pair.ingress.openStream();
        stream.handler = handlerWith((chunk) =>
          received.set(stream.id, (received.get(stream.id) ?? 0) + chunk.length),
        );
        stream.sendHeaders(Buffer.from('head'), true);
        return stream;
      };
      for (let i = 0; i < LINK_MAX_STREAMS - 1; i++) open();
      const total = (): number => [...received.values()].reduce((sum, bytes) => sum + bytes, 0);
      expect(await turnsUntil(() => total() === (LINK_MAX_STREAMS - 1) * LINK_STREAM_WINDOW)).toBe(true);
      const last = open();
      expect(await turnsUntil(() => received.get(last.id) === LINK_STREAM_WINDOW)).toBe(true);
      // A few more turns: nothing beyond the windows comes.
      for (let turn = 0; turn < 8; turn++) await new Promise((resolve) => setImmediate(resolve));
      // Each stream got exactly its own window, the last one too.
      for (const bytes of received.values()) expect(bytes).toBe(LINK_STREAM_WINDOW);
    } finally {
      pair.close();
    }
  });
});
