import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createTestBackend } from '@tunnel2/test-backend';
import fc from 'fast-check';
import { afterAll, expect, it } from 'vitest';
import { NodeAuth } from '../../edge/src/cluster/node-auth.js';
import { connect } from '../src/index.js';
import { linkSequence } from './support/fuzz-link-model.js';
import { type LinkFuzzContext, runLinkSequence } from './support/fuzz-link-run.js';
import { edgeState } from './support/fuzz-run.js';
import { send } from './support/http-client.js';
import { currentRss, peakRss, spawnNode } from './support/processes.js';

// A hostile peer NODE, modelled with fast-check, against a real edge in its own process: the fuzzer holds
// the cluster secret, so every link it opens is authenticated, and then it sends what a broken or hostile
// node could (HELLO variants, request streams for the target's own session, for unknown ones, without the
// link metadata, TCP heads, random and damaged frames, rapid resets, PING floods while it stops reading),
// split across and packed into WebSocket messages. Meanwhile the target's own tunnel is probed and must
// answer every time; after every link, and at the end, the target must hold nothing of it: no link, no link
// stream, nothing in flight, its window budget back where it was, and no more file descriptors than before.
//
// TUNNEL2_FUZZ_MS: time budget (default 20 s). TUNNEL2_LINK_FUZZ_RUNS: most links (default 400).
// TUNNEL2_FUZZ_SEED: replays a run (printed).

const BUDGET_MS = Number(process.env.TUNNEL2_FUZZ_MS ?? 20_000);
const RUNS = Number(process.env.TUNNEL2_LINK_FUZZ_RUNS ?? 400);
const SEED = Number(process.env.TUNNEL2_FUZZ_SEED ?? Date.now() % 2 ** 31);
const SECRET = 'a-cluster-secret-of-at-least-32-characters';
const TARGET = 'node-t';
/**
 * File descriptors the target may hold beyond its count at the start once every fuzz link is gone: the
 * probes' keep-alive connections and the state port's come and go; a leaked socket per link shows as
 * dozens or hundreds over a run.
 */
const FD_SLACK = 8;

const edgeScript = fileURLToPath(new URL('./support/edge-process.mjs', import.meta.url));
const cleanups: (() => unknown)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const mib = (bytes: number): number => Math.round(bytes / 2 ** 20);
const openFds = (pid: number): number => readdirSync(`/proc/${pid}/fd`).length;

it(
  'a hostile peer node that knows the secret never crashes the target, nor leaves it holding links, streams or sockets',
  async () => {
    console.log(`link fuzz seed ${SEED} (replay: TUNNEL2_FUZZ_SEED=${SEED} TUNNEL2_FUZZ_MS=${BUDGET_MS})`);
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const edge = spawnNode([
      edgeScript,
      JSON.stringify({
        nodeId: TARGET,
        cluster: { secret: SECRET },
        // Short timers so a link that leaves things hanging is over in seconds, not minutes.
        helloTimeoutMs: 500,
        responseTimeoutMs: 2_000,
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

    const probe = async (): Promise<void> => {
      const res = await send({ port, path: '/loadtest/ping', headers: ['Host', `steady.localhost:${port}`] });
      if (res.status !== 200) throw new Error(`steady probe got ${res.status}`);
    };
    for (let i = 0; i < 20; i++) await probe();
    const start = await edgeState(statePort);
    const fdsStart = openFds(pid);

    let probes = 0;
    const probeFailures: string[] = [];
    let probing = true;
    const prober = (async () => {
      while (probing) {
        try {
          await probe();
          probes++;
        } catch (err) {
          probeFailures.push((err as Error).message);
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();

    const ctx: LinkFuzzContext = {
      url,
      statePort,
      targetNode: TARGET,
      auth: new NodeAuth(SECRET),
      steady: 'steady',
      edgeAlive: () => edge.child.exitCode === null,
      stats: {
        links: 0,
        frames: 0,
        streams: 0,
        responses: 0,
        resets: 0,
        closedByTarget: 0,
        floodBytes: 0,
        maxQueued: 0,
      },
    };
    let failure: unknown;
    // fast-check interrupts at the time limit by racing the running sequence: it is awaited below.
    let running: Promise<void> = Promise.resolve();
    try {
      await fc.assert(
        fc.asyncProperty(linkSequence, async (seq) => {
          running = runLinkSequence(ctx, seq);
          await running;
        }),
        { seed: SEED, numRuns: RUNS, interruptAfterTimeLimit: BUDGET_MS, markInterruptAsFailure: false },
      );
    } catch (err) {
      failure = err;
    }
    await running.catch(() => {});
    probing = false;
    await prober;
    const alive = edge.child.exitCode === null;
    const end = alive ? await edgeState(statePort) : undefined;
    const fdsEnd = alive ? openFds(pid) : 0;
    const { stats } = ctx;
    console.log(
      `link fuzz (seed ${SEED}, ${BUDGET_MS} ms, at most ${RUNS} links): ${stats.links} links, ${stats.frames} frames, ` +
        `${stats.streams} streams opened, ${stats.responses} responses and ${stats.resets} resets from the target, ` +
        `${stats.closedByTarget} links closed by the target, ${mib(stats.floodBytes)} MiB of PING floods ` +
        `(largest queue ${mib(stats.maxQueued)} MiB); target fds start/end ${fdsStart}/${fdsEnd}, ` +
        `RSS start/peak/end ${mib(start.rss)}/${alive ? mib(peakRss(pid)) : '-'}/${alive ? mib(currentRss(pid)) : '-'} MiB, ` +
        `window budget used start/end ${start.windowBudgetUsed}/${end?.windowBudgetUsed}; ${probes} steady probes`,
    );
    if (failure !== undefined) throw failure;

    expect(edge.child.exitCode, `target stderr: ${edge.stderr()}`).toBeNull();
    expect(probeFailures).toEqual([]);
    expect(stats.links).toBeGreaterThan(0);
    expect(end).toMatchObject({ links: 0, linkStreams: 0, linkBufferedBytes: 0, inFlight: 0 });
    expect(Object.keys(end?.sessions ?? {})).toEqual(['steady']);
    expect(end?.windowBudgetUsed).toBe(start.windowBudgetUsed);
    expect(fdsEnd - fdsStart).toBeLessThanOrEqual(FD_SLACK);
    await probe();
  },
  BUDGET_MS + 90_000,
);
