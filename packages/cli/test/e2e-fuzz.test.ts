import { Agent as HttpAgent } from 'node:http';
import { fileURLToPath } from 'node:url';
import { createTestBackend } from '@tunnel2/test-backend';
import fc from 'fast-check';
import { afterAll, expect, it } from 'vitest';
import { connect } from '../src/index.js';
import { sequence } from './support/fuzz-model.js';
import { edgeState, type FuzzContext, runSequence } from './support/fuzz-run.js';
import { send } from './support/http-client.js';
import { currentRss, peakRss, spawnNode } from './support/processes.js';

// A hostile agent, modelled with fast-check, against a real edge in its own process, for a bounded time.
// Each fuzz sequence is one fresh agent session (HELLO variants, frames for streams the edge opened and for
// invented ones, answers to public requests the fuzzer makes to its own tunnel, byte-level damage, frames
// split across and packed into WebSocket messages, floods while it stops reading). Meanwhile a real agent
// (`connect()`) in front of a real backend is probed: it must answer every time.
//
// TUNNEL2_FUZZ_MS: time budget (default 30 s). TUNNEL2_FUZZ_SEED: replays a run (printed on failure).

const BUDGET_MS = Number(process.env.TUNNEL2_FUZZ_MS ?? 30_000);
const SEED = Number(process.env.TUNNEL2_FUZZ_SEED ?? Date.now() % 2 ** 31);
/**
 * Peak RSS may exceed the edge's RSS at the start by this much. One fuzz session runs at a time and may
 * legitimately pin a 4 MiB WebSocket message, one response window (256 KiB) per stream and, while it stops
 * reading, up to QUEUE_BOUND (8 MiB) queued towards it; with V8's heap slack that is well under 96 MiB. An edge
 * that queues an answer to every frame of a flood grows past it within one 32 MiB flood or two.
 */
const RSS_GROWTH_BOUND = 96 * 1024 * 1024;

const edgeScript = fileURLToPath(new URL('./support/edge-process.mjs', import.meta.url));
const cleanups: (() => unknown)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const mib = (bytes: number): number => Math.round(bytes / 2 ** 20);
const percentile = (sorted: number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;

it(
  'a hostile agent never crashes the edge, its RSS stays bounded, and another session keeps serving',
  async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const edge = spawnNode([
      edgeScript,
      JSON.stringify({
        // Short timers so a sequence that leaves things hanging is over in seconds, not minutes.
        helloTimeoutMs: 500,
        responseTimeoutMs: 2_000,
        // Unique names per sequence: no reservation of a closed fuzz session's name needs to outlive it.
        reconnectGraceMs: 0,
      }),
      '--state',
    ]);
    cleanups.push(async () => {
      edge.kill();
      await edge.exited;
    });
    const listening = await edge.waitFor('listening');
    const port = listening.port as number;
    const statePort = listening.statePort as number;
    const pid = edge.child.pid!;
    const url = `http://127.0.0.1:${port}`;
    const steady = await connect({ target: backend.port, server: url, subdomain: 'steady' });
    cleanups.push(() => steady.close(0));

    const probe = async (): Promise<number> => {
      const started = performance.now();
      const res = await send({ port, path: '/loadtest/ping', headers: ['Host', `steady.localhost:${port}`] });
      if (res.status !== 200) throw new Error(`steady probe got ${res.status}`);
      return performance.now() - started;
    };
    for (let i = 0; i < 20; i++) await probe(); // warm up before the RSS baseline
    const rssStart = currentRss(pid);

    // The steady session is probed back to back for the whole run; every probe must succeed.
    const latencies: number[] = [];
    const probeFailures: string[] = [];
    let probing = true;
    let rssMax = rssStart;
    const prober = (async () => {
      while (probing) {
        try {
          latencies.push(await probe());
        } catch (err) {
          probeFailures.push((err as Error).message);
        }
        if (edge.child.exitCode === null) rssMax = Math.max(rssMax, currentRss(pid));
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();

    const ctx: FuzzContext = {
      url,
      port,
      statePort,
      edgeAlive: () => edge.child.exitCode === null,
      stats: { sequences: 0, frames: 0, closedForProtocol: 0, requests: 0, floodBytes: 0, maxQueued: 0 },
    };
    // One keep-alive connection per sequence's requests: a response the edge let an agent smuggle would be
    // read as the answer to the next request on it, and caught.
    let failure: unknown;
    // fast-check interrupts at the time limit by racing the running sequence, which then goes on alone:
    // it is awaited below, so the end-of-run checks never see a sequence still in progress.
    let running: Promise<void> = Promise.resolve();
    try {
      await fc.assert(
        fc.asyncProperty(sequence, async (seq) => {
          const httpAgent = new HttpAgent({ keepAlive: true, maxSockets: 1 });
          running = runSequence(ctx, seq, httpAgent).finally(() => httpAgent.destroy());
          await running;
        }),
        {
          seed: SEED,
          numRuns: Number.MAX_SAFE_INTEGER,
          interruptAfterTimeLimit: BUDGET_MS,
          markInterruptAsFailure: false,
        },
      );
    } catch (err) {
      failure = err;
    }
    await running.catch(() => {});
    probing = false;
    await prober;
    const rssPeak = edge.child.exitCode === null ? peakRss(pid) : rssMax;
    const rssEnd = edge.child.exitCode === null ? currentRss(pid) : 0;
    const sorted = [...latencies].sort((a, b) => a - b);
    const { stats } = ctx;
    console.log(
      `fuzz (seed ${SEED}, ${BUDGET_MS} ms): ${stats.sequences} sequences, ${stats.frames} frames, ` +
        `${stats.requests} public requests, ${stats.closedForProtocol} sessions closed by the edge for protocol errors, ` +
        `${mib(stats.floodBytes)} MiB of floods (largest queue reported ${mib(stats.maxQueued)} MiB); ` +
        `edge RSS start/peak/end ${mib(rssStart)}/${mib(rssPeak)}/${mib(rssEnd)} MiB; ` +
        `steady probes ${latencies.length}, p50 ${percentile(sorted, 50).toFixed(1)} ms, p99 ${percentile(sorted, 99).toFixed(1)} ms`,
    );
    if (failure !== undefined) {
      console.log(`fuzz failed: replay with TUNNEL2_FUZZ_SEED=${SEED} TUNNEL2_FUZZ_MS=${BUDGET_MS}`);
      throw failure;
    }

    expect(edge.child.exitCode, `edge stderr: ${edge.stderr()}`).toBeNull();
    expect(probeFailures).toEqual([]);
    expect(latencies.length).toBeGreaterThan(0);
    expect(stats.sequences).toBeGreaterThan(0);
    expect(rssPeak - rssStart).toBeLessThan(RSS_GROWTH_BOUND);
    // Every fuzz session is gone; only the steady one remains, and it still answers.
    expect(Object.keys((await edgeState(statePort)).sessions)).toEqual(['steady']);
    expect((await probe()) >= 0).toBe(true);
  },
  BUDGET_MS + 90_000,
);
