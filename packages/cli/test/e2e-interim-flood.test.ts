import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { encodeFrame, FrameType } from '@tunnel2/protocol';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { hostileAgent, responseHead } from './support/hostile-agent.js';
import { send } from './support/http-client.js';
import { currentRss, peakRss, type Spawned, spawnNode } from './support/processes.js';
import { until } from './support/stack.js';

// A backend that answers with 300,000 `102 Processing` heads, to a client that never reads. The edge runs
// in its own process so its memory is measured apart from the test's. Before the cap, every interim head
// was written into the client's socket and queued there: the edge's RSS grew by hundreds of MB.

const INTERIM_HEADS = 300_000;
/** Interim heads per WebSocket message: the flood goes out as 300 messages, each awaited (bounded here too). */
const PER_MESSAGE = 1_000;
const RSS_GROWTH_LIMIT = 50 * 1024 * 1024;

const edgeScript = fileURLToPath(new URL('./support/edge-process.mjs', import.meta.url));
let edge: Spawned;
let port = 0;
/** Set when the flood request reaches the agent; resolves once every interim head has been sent. */
let floodSent: Promise<void> | undefined;
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  edge = spawnNode([edgeScript, JSON.stringify({})]);
  port = ((await edge.waitFor('listening')) as { port: number }).port;
  const url = `http://127.0.0.1:${port}`;
  // Each head carries a 100-byte field, as a progress report might.
  const head102 = responseHead(102, ['X-Progress', 'p'.repeat(100)], 'Processing');
  cleanups.push(
    await hostileAgent(url, 'flood', (stream, { target }, raw) => {
      if (target !== '/flood') {
        stream.sendHeaders(responseHead(200, ['Content-Length', '2'], 'OK'), false);
        stream.write(Buffer.from('ok'));
        stream.end();
        return;
      }
      // Raw frames: the agent's own stream would stop sending once the edge resets it; a hostile one does not.
      const frame = encodeFrame(FrameType.HEADERS, 0, stream.id, head102);
      const message = Buffer.concat(Array.from({ length: PER_MESSAGE }, () => frame));
      floodSent = (async () => {
        for (let sent = 0; sent < INTERIM_HEADS; sent += PER_MESSAGE) await raw(message);
      })();
    }),
  );
  cleanups.push(
    await hostileAgent(url, 'good', (stream) => {
      stream.sendHeaders(responseHead(200, ['Content-Length', '4'], 'OK'), false);
      stream.write(Buffer.from('good'));
      stream.end();
    }),
  );
});

afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  edge?.kill('SIGTERM');
  await edge?.exited;
});

const good = () => send({ port, path: '/', headers: ['Host', `good.localhost:${port}`] });

it('300,000 interim heads to a client that does not read: the edge RSS stays flat, other tunnels answer', async () => {
  for (let i = 0; i < 20; i++) expect((await good()).status).toBe(200);
  const before = currentRss(edge.child.pid!);

  // A client that sends its request and never reads a byte of the answer.
  const stalled: Socket = connect(port, '127.0.0.1');
  await once(stalled, 'connect');
  stalled.on('error', () => {});
  stalled.pause();
  stalled.write(`GET /flood HTTP/1.1\r\nHost: flood.localhost:${port}\r\n\r\n`);
  cleanups.push(() => stalled.destroy());

  // Another tunnel keeps answering while the flood arrives.
  const latencies: number[] = [];
  let flooding = true;
  const alongside = (async () => {
    for (let i = 0; i < 200 && flooding; i++) {
      const started = performance.now();
      expect((await good()).status).toBe(200);
      latencies.push(performance.now() - started);
    }
  })();
  await until(() => floodSent !== undefined);
  await floodSent;
  // Frames on one session are handled in order: once this answer is back, the edge has taken the whole flood.
  const after = await send({ port, path: '/ping', headers: ['Host', `flood.localhost:${port}`] });
  expect(after.status).toBe(200);
  flooding = false;
  await alongside;

  const now = currentRss(edge.child.pid!);
  const peak = peakRss(edge.child.pid!);
  const mb = (bytes: number) => Math.round(bytes / 1024 / 1024);
  console.log(
    `interim flood: edge RSS before ${mb(before)} MB, after ${mb(now)} MB, peak ${mb(peak)} MB; ` +
      `${latencies.length} requests to another tunnel meanwhile, max ${Math.round(Math.max(...latencies))} ms`,
  );
  expect(latencies.length).toBeGreaterThan(0);
  expect(peak - before).toBeLessThan(RSS_GROWTH_LIMIT);
}, 120_000);
