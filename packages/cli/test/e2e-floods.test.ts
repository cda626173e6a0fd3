import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import {
  decodeFrames,
  ErrorCode,
  encodeFrame,
  encodeHelloPayload,
  encodeRequestHead,
  FrameFlags,
  FrameType,
  PROTOCOL_VERSION,
  parseGoAway,
  resolveSettings,
} from '@tunnel2/protocol';
import { createTestBackend } from '@tunnel2/test-backend';
import { afterAll, beforeAll, expect, it } from 'vitest';
import WebSocket from 'ws';
import { connect } from '../src/index.js';
import { send } from './support/http-client.js';
import { currentRss, peakRss, type Spawned, spawnNode } from './support/processes.js';

// Flood protection (issue #18, defect 3), end to end: a hostile agent floods the edge with frames that demand
// an answer and never reads its socket. The edge runs in its own process so its RSS is its own; a real agent
// and backend in this process are the "other tunnel" that must keep answering meanwhile.

const edgeScript = fileURLToPath(new URL('./support/edge-process.mjs', import.meta.url));
const MiB = 2 ** 20;
/** Bounds of each flood, in frames and in time; the edge cuts the session off long before either. */
const FLOOD_FRAMES = 1_000_000;
const FLOOD_MS = 15_000;

let backend: Awaited<ReturnType<typeof createTestBackend>>;
let edge: Spawned;
let port: number;
let steady: Awaited<ReturnType<typeof connect>>;

beforeAll(async () => {
  backend = await createTestBackend();
  edge = spawnNode([edgeScript, JSON.stringify({})]);
  ({ port } = (await edge.waitFor('listening')) as { port: number });
  steady = await connect({ target: backend.port, server: `http://127.0.0.1:${port}`, subdomain: 'steady' });
});

afterAll(async () => {
  await steady?.close(0);
  edge?.kill('SIGTERM');
  await edge?.exited;
  await backend?.close();
});

/** One GET through the steady tunnel; its latency in ms. */
async function steadyRequest(): Promise<number> {
  const start = performance.now();
  const res = await send({ port, path: '/loadtest/ping', headers: ['Host', `steady.localhost:${port}`] });
  expect(res.status).toBe(200);
  return performance.now() - start;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

/** A hand-written agent: HELLO, the edge's answer, then whatever the test sends. */
async function hostileAgent(name: string): Promise<{ ws: WebSocket; received: Buffer[] }> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/_tunnel2/connect?name=${name}`, {
    perMessageDeflate: false,
    headers: { 'x-tunnel2-agent-key': `key-${name}` },
  });
  const received: Buffer[] = [];
  ws.on('message', (data: Buffer) => received.push(data));
  ws.on('error', () => {});
  await once(ws, 'open');
  const hello = encodeHelloPayload({
    minVersion: PROTOCOL_VERSION,
    maxVersion: PROTOCOL_VERSION,
    settings: resolveSettings({ heartbeatIntervalMs: 0 }),
    meta: { agent: 'flooder' },
  });
  ws.send(encodeFrame(FrameType.HELLO, 0, 0, hello));
  await once(ws, 'message');
  return { ws, received };
}

interface FloodReport {
  framesSent: number;
  rssBeforeMiB: number;
  rssMaxMiB: number;
  rssAfterMiB: number;
  peakMiB: number;
  baselineMs: number;
  duringMs: number;
  requestsDuring: number;
  closeCode: number | undefined;
  goAwayCode: number | undefined;
}

/**
 * Runs one flood: `batch(first)` returns one WebSocket message of frames. The hostile agent stops reading
 * first; the steady tunnel is measured before and throughout. Afterwards the agent reads again, so the test
 * sees what the edge sent it last: the GOAWAY and the close.
 */
async function flood(name: string, batch: (first: number) => { message: Buffer; frames: number }) {
  for (let i = 0; i < 5; i++) await steadyRequest(); // warm-up
  const baseline: number[] = [];
  for (let i = 0; i < 30; i++) baseline.push(await steadyRequest());

  const { ws, received } = await hostileAgent(name);
  let closeCode: number | undefined;
  const closed = new Promise<void>((resolve) =>
    ws.on('close', (code: number) => {
      closeCode = code;
      resolve();
    }),
  );
  ws.pause(); // the edge's answers now pile up on its side of the socket

  const rssBefore = currentRss(edge.child.pid!);
  let rssMax = rssBefore;
  let flooding = true;
  const during: number[] = [];
  const prober = (async () => {
    while (flooding) during.push(await steadyRequest());
  })();

  let framesSent = 0;
  const deadline = performance.now() + FLOOD_MS;
  while (framesSent < FLOOD_FRAMES && performance.now() < deadline && ws.readyState === WebSocket.OPEN) {
    const { message, frames } = batch(framesSent);
    // Wait for each message to be written, so this side's memory does not grow instead of the edge's.
    const error = await new Promise<Error | undefined>((resolve) => ws.send(message, resolve));
    if (error) break;
    framesSent += frames;
    // One turn for the steady tunnel's requests, which share this process's event loop.
    await new Promise((resolve) => setImmediate(resolve));
    rssMax = Math.max(rssMax, currentRss(edge.child.pid!));
  }
  flooding = false;
  await prober;
  rssMax = Math.max(rssMax, currentRss(edge.child.pid!));

  ws.resume();
  await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 10_000).unref())]);
  const goAway = received
    .flatMap((message) => decodeFrames(message))
    .find((frame) => frame.type === FrameType.GOAWAY);
  const report: FloodReport = {
    framesSent,
    rssBeforeMiB: Math.round(rssBefore / MiB),
    rssMaxMiB: Math.round(rssMax / MiB),
    rssAfterMiB: Math.round(currentRss(edge.child.pid!) / MiB),
    peakMiB: Math.round(peakRss(edge.child.pid!) / MiB),
    baselineMs: Number(median(baseline).toFixed(2)),
    duringMs: Number(median(during).toFixed(2)),
    requestsDuring: during.length,
    closeCode,
    goAwayCode: goAway === undefined ? undefined : parseGoAway(goAway.payload).code,
  };
  if (ws.readyState !== WebSocket.CLOSED) ws.terminate();
  console.log(`flood ${name}: ${JSON.stringify(report)}`);
  return report;
}

function expectCutOff(report: FloodReport): void {
  // The edge closed the session for a flood: GOAWAY(ENHANCE_YOUR_CALM), then a protocol-error close.
  expect(report.goAwayCode).toBe(ErrorCode.ENHANCE_YOUR_CALM);
  expect(report.closeCode).toBe(1002);
  // Flat memory: the edge's queue of answers is bounded (before: hundreds of MB).
  expect(report.rssMaxMiB - report.rssBeforeMiB).toBeLessThan(50);
  // The steady tunnel kept answering, with latency near its baseline (generous: two shared, noisy cores).
  expect(report.requestsDuring).toBeGreaterThan(0);
  expect(report.duringMs).toBeLessThan(Math.max(20 * report.baselineMs, report.baselineMs + 100));
}

it('an agent that sends millions of PINGs and never reads is cut off; RSS stays flat; others keep answering', async () => {
  const PER_MESSAGE = 2_000;
  const pings = Buffer.concat(
    Array.from({ length: PER_MESSAGE }, (_, i) => {
      const payload = Buffer.alloc(8);
      payload.writeUInt32BE(i, 4);
      return encodeFrame(FrameType.PING, 0, 0, payload);
    }),
  );
  const report = await flood('flood-ping', () => ({ message: pings, frames: PER_MESSAGE }));
  expectCutOff(report);
}, 60_000);

it('an agent that opens streams of its own and never reads is cut off; RSS stays flat; others keep answering', async () => {
  const PER_MESSAGE = 2_000;
  const head = encodeRequestHead({ method: 'GET', target: '/', headers: [] }, 65_536);
  const report = await flood('flood-open', (first) => {
    const frames: Buffer[] = [];
    // Even ids, always increasing: each is a new stream the edge refuses with a RESET.
    for (let i = 0; i < PER_MESSAGE; i++)
      frames.push(encodeFrame(FrameType.HEADERS, FrameFlags.END_STREAM, 2 * (first + i + 1), head));
    return { message: Buffer.concat(frames), frames: PER_MESSAGE };
  });
  expectCutOff(report);
}, 60_000);
