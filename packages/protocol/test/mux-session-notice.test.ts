import { afterEach, describe, expect, it } from 'vitest';
import { defaultSettings, encodeFrame, encodeHello, FrameType, MAX_NOTICE_BYTES } from '../src/index.js';
import { connectPair, createRawPeer, type Pair } from './support/mux-harness.js';

// NOTICE (PROTOCOL.md §2, §8): session metadata that changed after HELLO, as a JSON object on stream 0
// (on another stream it is a frame error, as HELLO is: frame-codec.test.ts).

const pairs: Pair[] = [];
afterEach(() => {
  for (const pair of pairs.splice(0)) pair.dispose();
});

const edgeHello = encodeHello(
  { minVersion: 1, maxVersion: 1, settings: { ...defaultSettings }, meta: { name: 'shop' } },
  true,
);
const notice = (payload: string, streamId = 0) =>
  encodeFrame(FrameType.NOTICE, 0, streamId, Buffer.from(payload));

describe('NOTICE', () => {
  it('the edge tells the agent what changed; the agent hears it as an object, in order', async () => {
    const pair = await connectPair();
    pairs.push(pair);
    pair.edge.session.sendNotice({ replicas: 2 });
    pair.edge.session.sendNotice({ replicas: 3 });
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(pair.agent.events.notices).toEqual([{ replicas: 2 }, { replicas: 3 }]);
  });

  it('a payload that is not a JSON object is skipped, as an unknown frame is; the session goes on', () => {
    const peer = createRawPeer('agent');
    peer.session.sendHello({ agent: 'test' }, false);
    peer.feed(edgeHello, notice('not json'), notice('[1,2]'), notice('7'), notice('{"replicas":4}'));
    expect(peer.events.notices).toEqual([{ replicas: 4 }]);
    expect(peer.session.closed).toBe(false);
  });

  it('a payload over MAX_NOTICE_BYTES is skipped unread (a hostile edge cannot make the agent parse megabytes)', () => {
    const peer = createRawPeer('agent');
    peer.session.sendHello({ agent: 'test' }, false);
    const big = JSON.stringify({ replicas: 5, pad: 'x'.repeat(MAX_NOTICE_BYTES) });
    peer.feed(edgeHello, notice(big), notice('{"replicas":6}'));
    expect(peer.events.notices).toEqual([{ replicas: 6 }]);
    expect(peer.session.closed).toBe(false);
  });
});
