import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { decodeResponseHead, encodeRequestHead, type MuxSession, type MuxStream } from '@tunnel2/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../src/index.js';
import { type HeldUpgradeBackend, startHeldUpgradeBackend } from './support/held-upgrade-backend.js';
import { startPlayedEdge } from './support/played-edge.js';
import { until } from './support/stack.js';
import { clientFrame, OPCODE } from './support/ws-frames.js';

// What the agent does with a WebSocket client's bytes that come before its backend's 101, seen from an edge
// played by the test, which sends what a real edge of today never does: an END before the answer (an edge
// from before the client-FIN rule), a whole stream window of early bytes, a byte at a time among a bulk
// stream. The real edge's side of the same upgrades: e2e-websocket-pending.test.ts.

const MiB = 1024 * 1024;

let backend: HeldUpgradeBackend;

beforeAll(async () => {
  backend = await startHeldUpgradeBackend();
});

afterAll(async () => {
  await backend.close();
});

/** A WebSocket upgrade's head as an edge sends it on a stream. */
function upgradeHead(target: string): Buffer {
  return encodeRequestHead(
    {
      method: 'GET',
      target,
      headers: [
        'host',
        'played.played',
        'upgrade',
        'websocket',
        'connection',
        'Upgrade',
        'sec-websocket-version',
        '13',
        'sec-websocket-key',
        'dGhlIHNhbXBsZSBub25jZQ==',
      ],
    },
    64 * 1024,
  );
}

/** An edge played by the test (it sends what it likes on the agent's session), with the agent connected. */
async function playedStack(): Promise<{ session: MuxSession; close(): Promise<void> }> {
  let opened: (session: MuxSession) => void = () => {};
  const ready = new Promise<MuxSession>((resolve) => {
    opened = resolve;
  });
  const played = await startPlayedEdge((_hello, session) => {
    session.sendHello({ name: 'played', url: 'http://played.played/', urls: [] }, true);
    opened(session);
  });
  const agent = await connect({ target: backend.port, server: played.url });
  return {
    session: await ready,
    async close() {
      await agent.close(0);
      await played.close();
    },
  };
}

/** A stream whose answer's heads are listed (by status) and whose bytes are taken as they come. */
function watchedStream(session: MuxSession): { stream: MuxStream; heads: number[] } {
  const stream = session.openStream();
  const heads: number[] = [];
  stream.handler = {
    onHeaders: (payload) => heads.push(decodeResponseHead(payload).status),
    onData: (chunk) => stream.consume(chunk.length),
    onEnd: () => {},
    onReset: () => {},
    onDrain: () => {},
  };
  return { stream, heads };
}

describe('an edge that ended the client side before the 101 (an edge from before the client-FIN rule)', () => {
  it('the agent writes the held bytes after the switch, then ends the backend side', async () => {
    const played = await playedStack();
    try {
      const arriving = backend.next();
      const { stream, heads } = watchedStream(played.session);
      const early = clientFrame(OPCODE.text, 'last words');
      stream.sendHeaders(upgradeHead('/half-closed'), false);
      stream.write(early);
      stream.end();
      const connection = await arriving;
      connection.accept();
      await connection.ended;
      expect(Buffer.concat(connection.after).equals(early)).toBe(true);
      expect(heads).toEqual([101]);
    } finally {
      await played.close();
    }
  });
});

describe('the credit of the held bytes', () => {
  it('a refusal returns it: the stream takes a window more after it (without, it stalled for good)', async () => {
    const played = await playedStack();
    try {
      const arriving = backend.next();
      const { stream, heads } = watchedStream(played.session);
      stream.sendHeaders(upgradeHead('/refused-full'), false);
      // Nearly the agent's whole stream window (256 KiB), held while the backend has not answered.
      const early = Buffer.alloc(250 * 1024, 1);
      expect(stream.write(early)).toBe(true);
      const connection = await arriving;
      connection.socket.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n');
      await until(() => heads.length > 0);
      expect(heads).toEqual([403]);
      // What the client sends after the refusal has nowhere to go and is dropped, within the same window: it
      // only passes if the held bytes' credit came back with the refusal.
      stream.write(Buffer.alloc(200 * 1024, 2));
      await until(() => stream.pendingBytes === 0, {
        what: 'the credit of the dropped bytes',
        timeoutMs: 10_000,
      });
    } finally {
      await played.close();
    }
  });
});

describe('the memory the held bytes take', () => {
  it('is what they weigh, not the reads they arrived in (a byte at a time, among a bulk stream)', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const played = await playedStack();
    try {
      // A: an upgrade the backend has not answered, sent a byte at a time. B: an upgrade refused at once, so
      // the agent drops what comes on it: a bulk of bytes around each of A's, in the same socket reads.
      const arrivingA = backend.next();
      const a = watchedStream(played.session);
      a.stream.sendHeaders(upgradeHead('/held'), false);
      const connectionA = await arrivingA;
      const arrivingB = backend.next();
      const b = watchedStream(played.session);
      b.stream.sendHeaders(upgradeHead('/refused'), false);
      const connectionB = await arrivingB;
      connectionB.socket.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n');
      await until(() => b.heads.length > 0);
      const bytes = 2_000;
      const bulk = Buffer.alloc(48 * 1024, 7);
      for (let i = 0; i < bytes; i++) {
        a.stream.write(Buffer.from([i % 251]));
        if (!b.stream.write(bulk))
          await new Promise<void>((resolve) => (b.stream.handler!.onDrain = resolve));
      }
      // A barrier: C's head reaches the backend after the agent took every frame before it, all of A's bytes.
      const arrivingC = backend.next();
      watchedStream(played.session).stream.sendHeaders(upgradeHead('/barrier'), false);
      (await arrivingC).socket.destroy();
      gc();
      const holding = process.memoryUsage().arrayBuffers;
      connectionA.accept();
      const all = await connectionA.received(bytes);
      expect(all.equals(Buffer.from(Array.from({ length: bytes }, (_, i) => i % 251)))).toBe(true);
      connectionA.socket.destroy();
      await connectionA.closed;
      gc();
      // What the agent let go of once the held bytes went out: what holding them cost.
      const held = holding - process.memoryUsage().arrayBuffers;
      console.log(`${bytes} held bytes took ${(held / MiB).toFixed(1)} MiB of array buffers`);
      expect(held).toBeLessThan(8 * MiB);
    } finally {
      await played.close();
    }
  });
});
