import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import {
  decodeResponseHead,
  ErrorCode,
  encodeRequestHead,
  MAX_EARLY_UPGRADE_BYTES,
  type MuxSession,
  type MuxStream,
  type ProtocolSettings,
} from '@tunnel2/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../src/index.js';
import { EDGE_EARLY_BYTES_HINT } from '../src/session/edge-hints.js';
import { type HeldUpgradeBackend, startHeldUpgradeBackend } from './support/held-upgrade-backend.js';
import { startPlayedEdge } from './support/played-edge.js';
import { until } from './support/stack.js';
import { clientFrame, OPCODE } from './support/ws-frames.js';

// What the agent does with a WebSocket client's bytes that come before its backend's 101, seen from an edge
// played by the test, which sends what a real edge of today never does: an END before the answer (an edge
// from before the client-FIN rule), more early bytes than an edge of today passes on (an edge from before
// the 16 KiB limit sends a whole stream window), a byte at a time among a bulk stream. The real edge's side
// of the same upgrades: e2e-websocket-pending.test.ts.

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

interface PlayedStack {
  session: MuxSession;
  /** The agent's hints, as it emitted them. */
  hints: { code: string; message: string }[];
  close(): Promise<void>;
}

/**
 * An edge played by the test (it sends what it likes on the agent's session), with the agent connected to
 * `to` (the shared backend unless given), announcing `protocol` settings of its own.
 */
async function playedStack(
  to: HeldUpgradeBackend = backend,
  protocol: Partial<ProtocolSettings> = {},
): Promise<PlayedStack> {
  let opened: (session: MuxSession) => void = () => {};
  const ready = new Promise<MuxSession>((resolve) => {
    opened = resolve;
  });
  const played = await startPlayedEdge((_hello, session) => {
    session.sendHello({ name: 'played', url: 'http://played.played/', urls: [] }, true);
    opened(session);
  });
  const agent = await connect({ target: to.port, server: played.url, protocol });
  const hints: { code: string; message: string }[] = [];
  agent.on('hint', (hint) => hints.push(hint));
  return {
    session: await ready,
    hints,
    async close() {
      await agent.close(0);
      await played.close();
    },
  };
}

/** A stream whose answer's heads are listed (by status) and whose bytes are taken as they come. */
function watchedStream(session: MuxSession): { stream: MuxStream; heads: number[]; resets: number[] } {
  const stream = session.openStream();
  const heads: number[] = [];
  const resets: number[] = [];
  stream.handler = {
    onHeaders: (payload) => heads.push(decodeResponseHead(payload).status),
    onData: (chunk) => stream.consume(chunk.length),
    onEnd: () => {},
    onReset: (error) => resets.push(error.protocolCode),
    onDrain: () => {},
  };
  return { stream, heads, resets };
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
    // The agent's stream window at 20 KiB: the held bytes (the 16 KiB an edge passes on) take nearly all of
    // it, and what is left is below the quarter of a window that makes the agent return credit.
    const played = await playedStack(backend, { initialStreamWindow: 20 * 1024 });
    try {
      const arriving = backend.next();
      const { stream, heads } = watchedStream(played.session);
      stream.sendHeaders(upgradeHead('/refused-full'), false);
      const early = Buffer.alloc(MAX_EARLY_UPGRADE_BYTES, 1);
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
    // Twice, a turn of the event loop apart: array buffers are freed by finalizers that one gc() only queues.
    const settledGc = async (): Promise<void> => {
      gc();
      await new Promise((resolve) => setImmediate(resolve));
      gc();
    };
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
      await settledGc();
      const holding = process.memoryUsage().arrayBuffers;
      connectionA.accept();
      const all = await connectionA.received(bytes);
      expect(all.equals(Buffer.from(Array.from({ length: bytes }, (_, i) => i % 251)))).toBe(true);
      connectionA.socket.destroy();
      await connectionA.closed;
      await settledGc();
      // What the agent let go of once the held bytes went out: what holding them cost.
      const held = holding - process.memoryUsage().arrayBuffers;
      console.log(`${bytes} held bytes took ${(held / MiB).toFixed(1)} MiB of array buffers`);
      expect(held).toBeLessThan(8 * MiB);
    } finally {
      await played.close();
    }
  });
});

describe('more early bytes than an edge of today sends (an edge from before the 16 KiB limit)', () => {
  it('past 16 KiB the agent resets that stream and returns its credit; another stream keeps flowing; one hint', async () => {
    // The agent's initial session window at 64 KiB: its batched session credit goes back at every 16 KiB, so
    // the credit of the reset stream is seen at once (at the default 16 MiB, only in 4 MiB batches).
    const played = await playedStack(backend, { initialSessionWindow: 64 * 1024 });
    try {
      // B: an answered WebSocket on the same session.
      const arrivingB = backend.next();
      const b = watchedStream(played.session);
      b.stream.sendHeaders(upgradeHead('/answered'), false);
      const connectionB = await arrivingB;
      connectionB.accept();
      await until(() => b.heads.length > 0);
      expect(b.heads).toEqual([101]);
      // Exactly the limit is held and written after the 101.
      const arrivingC = backend.next();
      const c = watchedStream(played.session);
      c.stream.sendHeaders(upgradeHead('/at-the-limit'), false);
      const atLimit = Buffer.alloc(MAX_EARLY_UPGRADE_BYTES, 5);
      c.stream.write(atLimit);
      const connectionC = await arrivingC;
      // A: one byte more, on an upgrade the backend has not answered, as an older edge sends it.
      const arrivingA = backend.next();
      const a = watchedStream(played.session);
      a.stream.sendHeaders(upgradeHead('/over-the-limit'), false);
      const connectionA = await arrivingA;
      const before = played.session.sessionSendWindow;
      a.stream.write(Buffer.alloc(MAX_EARLY_UPGRADE_BYTES + 1, 6));
      await until(() => a.resets.length > 0, {
        what: 'the reset of the stream over the limit',
        timeoutMs: 10_000,
      });
      expect(a.resets).toEqual([ErrorCode.PROTOCOL_ERROR]);
      expect(a.heads).toEqual([]);
      // Its backend connection goes with it, and nothing followed the request on it.
      await connectionA.closed;
      expect(Buffer.concat(connectionA.after).length).toBe(0);
      // The bytes it held are not kept from the session: their credit comes back.
      await until(() => played.session.sessionSendWindow >= before, {
        what: 'the session credit of the reset stream',
        timeoutMs: 10_000,
      });
      // One line saying what happened and what to do, naming the tunnel.
      expect(played.hints).toHaveLength(1);
      expect(played.hints[0]!.code).toBe(EDGE_EARLY_BYTES_HINT);
      expect(played.hints[0]!.message).toContain('played');
      expect(played.hints[0]!.message).toMatch(/older than this agent.*more than 16 KiB.*upgrade the edge/);
      // B keeps flowing, both ways.
      const message = clientFrame(OPCODE.text, 'still here');
      b.stream.write(message);
      expect((await connectionB.received(message.length)).equals(message)).toBe(true);
      // C, at the limit, was not reset: its bytes reach the backend after its 101.
      connectionC.accept();
      expect((await connectionC.received(atLimit.length)).equals(atLimit)).toBe(true);
      expect(c.resets).toEqual([]);
      // A second stream over the limit is reset too, without a second hint.
      const d = watchedStream(played.session);
      d.stream.sendHeaders(upgradeHead('/over-again'), false);
      d.stream.write(Buffer.alloc(MAX_EARLY_UPGRADE_BYTES + 1, 6));
      await until(() => d.resets.length > 0, { what: 'the second reset', timeoutMs: 10_000 });
      expect(played.hints).toHaveLength(1);
      connectionB.socket.destroy();
      connectionC.socket.destroy();
    } finally {
      await played.close();
    }
  });

  it("200+ unanswered upgrades sending a stream window each cannot take the tunnel's window from an answered WebSocket", async () => {
    // e2e-websocket-pending.test.ts "many upgrades" against an edge that passes on a whole stream window
    // (256 KiB) per upgrade before the answer: 210 of them are more than the agent's session window
    // (16 + 32 MiB). A backend of its own: the upgrades the agent resets leave connections behind in it.
    const own = await startHeldUpgradeBackend();
    const played = await playedStack(own);
    try {
      const arriving = own.next();
      const answered = watchedStream(played.session);
      answered.stream.sendHeaders(upgradeHead('/answered'), false);
      const connection = await arriving;
      connection.accept();
      await until(() => answered.heads.length > 0);
      const window = Buffer.alloc(256 * 1024, 3);
      const waiting = Array.from({ length: 210 }, (_, i) => {
        const upgrade = watchedStream(played.session);
        upgrade.stream.sendHeaders(upgradeHead(`/waiting-${i}`), false);
        upgrade.stream.write(window);
        return upgrade;
      });
      const total = 8 * MiB;
      const chunk = Buffer.alloc(64 * 1024);
      for (let i = 0; i < chunk.length; i++) chunk[i] = i % 251;
      const expected = Buffer.concat(Array.from({ length: total / chunk.length }, () => chunk));
      const sending = (async () => {
        for (let sent = 0; sent < total; sent += chunk.length) {
          if (!answered.stream.write(chunk))
            await new Promise<void>((resolve) => (answered.stream.handler!.onDrain = resolve));
        }
      })();
      // Bounded: without the agent's own limit it never came (the others held the whole session window).
      let timer: NodeJS.Timeout | undefined;
      const gaveUp = new Promise<Buffer>((resolve) => {
        timer = setTimeout(() => resolve(Buffer.alloc(0)), 20_000);
      });
      const all = await Promise.race([connection.received(total), gaveUp]);
      clearTimeout(timer);
      expect(all.equals(expected)).toBe(true);
      await sending;
      await until(() => waiting.every((upgrade) => upgrade.resets.length > 0), {
        what: 'every upgrade over the limit reset',
        timeoutMs: 10_000,
      });
      expect(new Set(waiting.flatMap((upgrade) => upgrade.resets))).toEqual(
        new Set([ErrorCode.PROTOCOL_ERROR]),
      );
      expect(played.hints).toHaveLength(1);
      connection.socket.destroy();
    } finally {
      await played.close();
      await own.close();
    }
  });
});
