import { fileURLToPath } from 'node:url';
import { createTestBackend } from '@tunnel2/test-backend';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { currentRss, peakRss, type Spawned, spawnCli, spawnNode } from './support/processes.js';

// Capacity is set by configuration, not by CPU: the edge lets one session carry STREAMS requests at once and
// the backend answers each after DELAY_MS, so the tunnel sustains STREAMS / DELAY_MS requests per second
// however fast the machine is. The test offers twice that for OVERLOAD_S seconds.
const STREAMS = 8;
const DELAY_MS = 100;
const CAPACITY_RPS = (STREAMS * 1000) / DELAY_MS;
const OFFERED_RPS = 2 * CAPACITY_RPS;
const OVERLOAD_S = Number(process.env.TUNNEL2_OVERLOAD_SECONDS ?? 60);
const TICK_MS = 50;
/** The generator never holds more than this many requests open: it is bounded too. */
const MAX_OPEN = 1_000;

const edgeScript = fileURLToPath(new URL('./support/edge-process.mjs', import.meta.url));

let backend: Awaited<ReturnType<typeof createTestBackend>>;
let edge: Spawned;
let agent: Spawned;
let base: string;
let client: Agent;

beforeAll(async () => {
  backend = await createTestBackend();
  edge = spawnNode([
    edgeScript,
    JSON.stringify({ maxStreamsPerSession: STREAMS, streamWaitMs: 200, maxWaitingPerSession: 16 }),
  ]);
  const { port } = (await edge.waitFor('listening')) as { port: number };
  agent = spawnCli([
    'http',
    String(backend.port),
    '--server',
    `http://127.0.0.1:${port}`,
    '--subdomain',
    'over',
    '--json',
  ]);
  await agent.waitFor('ready');
  base = `http://127.0.0.1:${port}/session/over`;
  client = new Agent({ connections: 512, keepAliveTimeout: 10_000 });
});

afterAll(async () => {
  await client?.close();
  agent?.kill('SIGTERM');
  edge?.kill('SIGTERM');
  await Promise.all([agent?.exited, edge?.exited]);
  await backend?.close();
});

interface Outcome {
  status: number;
  ms: number;
  retryAfter: boolean;
  error?: string;
}

async function once(path = `/loadtest/delay/${DELAY_MS}`): Promise<Outcome> {
  const started = performance.now();
  try {
    const res = await request(`${base}${path}`, { dispatcher: client });
    await res.body.dump();
    return {
      status: res.statusCode,
      ms: performance.now() - started,
      retryAfter: res.headers['retry-after'] !== undefined,
    };
  } catch (err) {
    return { status: 0, ms: performance.now() - started, retryAfter: false, error: String(err) };
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] ?? Number.NaN;
}

it(`under 2× the sustainable load for ${OVERLOAD_S} s the excess fails fast, RSS stays bounded and latency recovers`, {
  timeout: (OVERLOAD_S + 60) * 1000,
}, async () => {
  const pids = { edge: edge.child.pid!, agent: agent.child.pid! };
  const baseline: number[] = [];
  for (let i = 0; i < 10; i++) {
    const outcome = await once();
    expect(outcome.status).toBe(200);
    baseline.push(outcome.ms);
  }
  const baselineMs = median(baseline);
  const rssBefore = { edge: currentRss(pids.edge), agent: currentRss(pids.agent) };
  const rssMax = { ...rssBefore };

  // Paced open-loop load: OFFERED_RPS spread over ticks, whether or not earlier requests have answered.
  const outcomes: Outcome[] = [];
  const pending = new Set<Promise<void>>();
  let skipped = 0;
  const perTick = (OFFERED_RPS * TICK_MS) / 1000;
  const ticks = (OVERLOAD_S * 1000) / TICK_MS;
  let tick = 0;
  await new Promise<void>((resolve) => {
    const pacer = setInterval(() => {
      for (let i = 0; i < perTick; i++) {
        if (pending.size >= MAX_OPEN) {
          skipped++;
          continue;
        }
        const p: Promise<void> = once().then((o) => {
          outcomes.push(o);
          pending.delete(p);
        });
        pending.add(p);
      }
      if (++tick % (1000 / TICK_MS) === 0) {
        rssMax.edge = Math.max(rssMax.edge, currentRss(pids.edge));
        rssMax.agent = Math.max(rssMax.agent, currentRss(pids.agent));
      }
      if (tick >= ticks) {
        clearInterval(pacer);
        resolve();
      }
    }, TICK_MS);
  });
  const loadEnded = performance.now();
  await Promise.all(pending);

  // Recovery: sequential requests until one is back at baseline latency.
  let recoveredAfterMs = Number.POSITIVE_INFINITY;
  while (performance.now() - loadEnded < 15_000) {
    const outcome = await once();
    if (outcome.status === 200 && outcome.ms <= Math.max(baselineMs * 1.5, baselineMs + 50)) {
      recoveredAfterMs = performance.now() - loadEnded;
      break;
    }
  }

  const served = outcomes.filter((o) => o.status === 200);
  const shed = outcomes.filter((o) => o.status === 503 || o.status === 429);
  const failed = outcomes.filter((o) => o.status !== 200 && o.status !== 503 && o.status !== 429);
  const summary = {
    offered: outcomes.length + skipped,
    served: served.length,
    shed: shed.length,
    failed: failed.length,
    skipped,
    servedRps: Math.round(served.length / OVERLOAD_S),
    capacityRps: CAPACITY_RPS,
    servedP50Ms: Math.round(
      quantile(
        served.map((o) => o.ms),
        0.5,
      ),
    ),
    servedP99Ms: Math.round(
      quantile(
        served.map((o) => o.ms),
        0.99,
      ),
    ),
    shedP99Ms: Math.round(
      quantile(
        shed.map((o) => o.ms),
        0.99,
      ),
    ),
    shedMaxMs: Math.round(Math.max(0, ...shed.map((o) => o.ms))),
    baselineMs: Math.round(baselineMs),
    recoveredAfterMs: Math.round(recoveredAfterMs),
    rssMB: {
      edge: [rssBefore.edge, rssMax.edge, peakRss(pids.edge)].map((b) => Math.round(b / 2 ** 20)),
      agent: [rssBefore.agent, rssMax.agent, peakRss(pids.agent)].map((b) => Math.round(b / 2 ** 20)),
    },
  };
  process.stdout.write(`overload: ${JSON.stringify(summary)}\n`);

  // Every request got an answer: served, or refused with a reason and a Retry-After — no resets, no hangs.
  expect(skipped).toBe(0);
  expect(failed.slice(0, 5)).toEqual([]);
  expect(shed.every((o) => o.retryAfter)).toBe(true);
  // About half was served (capacity is half the offer) and the rest shed; bounds are loose for noise.
  expect(served.length).toBeGreaterThan(0.5 * CAPACITY_RPS * OVERLOAD_S);
  expect(shed.length).toBeGreaterThan(0.2 * CAPACITY_RPS * OVERLOAD_S);
  // Fast: a refusal takes at most the slot wait (200 ms) plus scheduling noise, never a timeout.
  expect(summary.shedP99Ms).toBeLessThan(1_500);
  // Memory stays bounded: nothing queues without limit.
  expect(rssMax.edge - rssBefore.edge).toBeLessThan(150 * 2 ** 20);
  expect(rssMax.agent - rssBefore.agent).toBeLessThan(150 * 2 ** 20);
  expect(recoveredAfterMs).toBeLessThan(10_000);
});
