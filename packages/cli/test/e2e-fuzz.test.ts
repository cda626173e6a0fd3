import { once } from 'node:events';
import { buildEdge } from '@tunnel2/edge';
import {
  encodeFrame,
  encodeHelloPayload,
  encodeRequestHead,
  FrameType,
  PROTOCOL_VERSION,
  resolveSettings,
} from '@tunnel2/protocol';
import { createTestBackend } from '@tunnel2/test-backend';
import { afterAll, expect, it } from 'vitest';
import WebSocket from 'ws';
import { connect } from '../src/index.js';
import { send } from './support/http-client.js';
import { silent } from './support/stack.js';

const cleanups: (() => unknown)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** xorshift32: a seeded generator, so a failure can be replayed. */
function prng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 0x1_00_00_00_00;
  };
}

const SEED = Number(process.env.TUNNEL2_FUZZ_SEED ?? 20261122);
const TOTAL_FRAMES = 100_000;

it(`${TOTAL_FRAMES} random and mutated frames never crash the edge; bad sessions close, a good one keeps serving`, async () => {
  const random = prng(SEED);
  const int = (n: number): number => Math.floor(random() * n);
  const bytes = (n: number): Buffer => Buffer.from(Array.from({ length: n }, () => int(256)));

  const backend = await createTestBackend();
  cleanups.push(() => backend.close());
  const edge = buildEdge({ port: 0, logger: silent, helloTimeoutMs: 2_000 });
  const { port, url } = await edge.listen();
  cleanups.push(() => edge.close(0));
  const good = await connect({ target: backend.port, server: url, subdomain: 'steady' });
  cleanups.push(() => good.close(0));

  /** A frame that is well-formed but means nothing sensible: the edge must shrug it off. */
  function plausibleFrame(): Buffer {
    switch (int(8)) {
      case 0:
        return encodeFrame(FrameType.PING, int(2), 0, bytes(8));
      case 1:
        return encodeFrame(
          FrameType.WINDOW_UPDATE,
          0,
          1 + 2 * int(1000),
          Buffer.from([0, 0, int(256), 1 + int(255)]),
        );
      case 2:
        return encodeFrame(FrameType.RESET, 0, 1 + int(5000), Buffer.from([0, 0, 0, int(16)]));
      case 3:
        // Data for one of the edge's own stream ids that is not open: dropped, credit returned.
        return encodeFrame(FrameType.DATA, int(2), 1 + 2 * int(1000), bytes(int(64)));
      case 4:
        // The agent opening a stream of its own: refused.
        return encodeFrame(
          FrameType.HEADERS,
          1,
          2 + 2 * int(1_000_000),
          encodeRequestHead(
            { method: 'GET', target: `/${int(1000)}`, headers: ['x', String(int(9))] },
            65_536,
          ),
        );
      case 5:
        return encodeFrame(0x40 + int(0x40), int(256), int(1000), bytes(int(32))); // unknown type: skipped
      case 6:
        return encodeFrame(FrameType.HEADERS, 0, 2 + 2 * int(1_000_000), bytes(int(40))); // garbage head
      default:
        return encodeFrame(FrameType.PING, 1, 0, bytes(8));
    }
  }

  /** A frame damaged in one of the ways a broken or hostile agent might send. */
  function mutatedFrame(): Buffer {
    const frame = Buffer.from(plausibleFrame());
    switch (int(4)) {
      case 0:
        frame[int(frame.length)] = int(256);
        return frame;
      case 1:
        frame.writeUIntBE(int(0xff_ff_ff), 0, 3); // a lying length
        return frame;
      case 2:
        return frame.subarray(0, int(frame.length)); // cut short
      default:
        return bytes(1 + int(64)); // noise
    }
  }

  async function openSession(index: number): Promise<WebSocket> {
    const ws = new WebSocket(`${url.replace('http', 'ws')}/_tunnel2/connect?name=fuzz${index}`, {
      perMessageDeflate: false,
      headers: { 'x-tunnel2-agent-key': `fuzz-${index}` },
    });
    await once(ws, 'open');
    const hello = encodeHelloPayload({
      minVersion: PROTOCOL_VERSION,
      maxVersion: PROTOCOL_VERSION,
      settings: resolveSettings({ heartbeatIntervalMs: 0 }),
      meta: { agent: 'fuzzer' },
    });
    ws.send(encodeFrame(FrameType.HELLO, 0, 0, hello));
    await once(ws, 'message');
    return ws;
  }

  let sent = 0;
  let sessions = 0;
  let closedByEdge = 0;
  while (sent < TOTAL_FRAMES) {
    const ws = await openSession(sessions++);
    let open = true;
    ws.on('close', (code: number) => {
      open = false;
      // 1002: the edge ended the session for a protocol error (its GOAWAY said which).
      if (code === 1002) closedByEdge++;
    });
    ws.on('error', () => {});
    while (open && sent < TOTAL_FRAMES) {
      const frames: Buffer[] = [];
      for (let i = 0; i < 200; i++) frames.push(random() < 0.003 ? mutatedFrame() : plausibleFrame());
      sent += frames.length;
      ws.send(Buffer.concat(frames));
      // Let the edge answer (and maybe close) before the next batch.
      await new Promise((resolve) => setImmediate(resolve));
      if (sent % 10_000 < 200) {
        const res = await send({
          port,
          path: '/loadtest/ping',
          headers: ['Host', `steady.localhost:${port}`],
        });
        expect(res.status).toBe(200);
      }
    }
    if (open) {
      ws.close();
      await once(ws, 'close');
    }
  }
  const res = await send({ port, path: '/loadtest/get', headers: ['Host', `steady.localhost:${port}`] });
  expect(res.status).toBe(200);
  expect(sent).toBeGreaterThanOrEqual(TOTAL_FRAMES);
  expect(closedByEdge).toBeGreaterThan(1);
  console.log(
    `fuzz: ${sent} frames over ${sessions} sessions (seed ${SEED}), ${closedByEdge} closed by the edge for protocol errors`,
  );
  // Every fuzz session is gone; only the steady one remains.
  while (edge.sessions.size > 1) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(edge.sessions.get('steady')).toBeDefined();
}, 120_000);
