import { MuxSession, WindowBudget } from '@tunnel2/protocol';
import { describe, expect, it } from 'vitest';
import { LINK_MAX_STREAMS, LINK_SESSION_WINDOW, linkSessionOptions } from '../src/cluster/link-settings.js';

describe('linkSessionOptions', () => {
  it("a link session's window growth draws on the edge's budget, as an agent session's does", () => {
    const edgeBudget = new WindowBudget(1024 * 1024);
    const session = new MuxSession({
      ...linkSessionOptions('edge', {}, edgeBudget),
      transport: { send: () => {}, close: () => {} },
      handler: { onHello: () => {}, onClose: () => {} },
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
});
