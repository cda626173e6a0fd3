import { Agent } from 'node:http';
import { createTestBackend } from '@tunnel2/test-backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, startCluster } from './support/cluster-harness.js';
import { send } from './support/http-client.js';
import { type Spawned, spawnCli } from './support/processes.js';

// A node with no agent of its own drains in a few milliseconds, while a load balancer that has not yet seen
// its /readyz turn still sends it requests, which it forwards to the node holding their session. Those that
// came in during its last steps (after its node links closed) opened a new link to the holder, which kept
// the process alive after the drain: `tunnel2 server` never exited (a rolling restart hung on it).

type Backend = Awaited<ReturnType<typeof createTestBackend>>;

const NAME = 'held-elsewhere';
/** Concurrent request loops aimed straight at the draining node, half of them over kept-alive connections. */
const LOOPS = 8;
/** The most a drained node may take to exit: its drain has nothing to wait for. */
const EXIT_WITHIN_MS = 5_000;

let cluster: Cluster;
let backend: Backend;
let agent: Spawned;

beforeAll(async () => {
  cluster = await startCluster({ nodes: 2 });
  backend = await createTestBackend();
  // Straight to node-0: the session is held there, and node-1 forwards every request for it.
  agent = spawnCli([
    'http',
    String(backend.port),
    '--json',
    '--server',
    `http://127.0.0.1:${cluster.nodes[0]!.port}`,
    '--subdomain',
    NAME,
  ]);
  agent.child.stdout?.resume();
  await agent.waitFor('ready');
}, 30_000);

afterAll(async () => {
  if (agent !== undefined) {
    agent.kill('SIGKILL');
    await agent.exited;
  }
  await cluster?.stop();
  await backend?.close();
});

interface Tally {
  ok: number;
  /** Answers that are not 200 with the backend's body: a request the node accepted and did not serve. */
  wrong: string[];
  /** Connections the stopping node refused or closed before taking the request: a balancer retries these. */
  notTaken: number;
  /** Answers to requests sent after the node said it drains that still kept their connection open. */
  keptAlive: number;
}

/**
 * Requests node-1 for the session held on node-0, one after another, until node-1's process has exited;
 * with `keepAlive`, over one kept-alive connection at a time, as a load balancer reuses its connections.
 */
async function requestUntilExit(
  port: number,
  state: { exited: boolean; draining: boolean },
  tally: Tally,
  keepAlive: boolean,
): Promise<void> {
  const agent = keepAlive ? new Agent({ keepAlive: true, maxSockets: 1 }) : false;
  while (!state.exited) {
    const afterDraining = state.draining;
    try {
      const res = await send({
        port,
        path: '/loadtest/ping',
        headers: ['Host', `${NAME}.localhost`],
        timeoutMs: 10_000,
        agent,
      });
      if (res.status === 200) tally.ok++;
      else tally.wrong.push(`${res.status} ${res.headers['x-tunnel2-error'] ?? ''}`);
      if (afterDraining && res.headers.connection !== 'close') tally.keptAlive++;
    } catch (err) {
      // Refused once the node stopped listening; reset when it closed a connection as the request went
      // out (a kept-alive connection's race, which a client or balancer retries).
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ECONNREFUSED' || code === 'ECONNRESET') tally.notTaken++;
      else tally.wrong.push(String(err));
    }
  }
  if (agent !== false) agent.destroy();
}

describe('a node that drains while requests it forwards keep arriving', () => {
  it('exits once drained, having answered every request it took', async () => {
    const node = cluster.nodes[1]!;
    for (let round = 0; round < 5; round++) {
      const tally: Tally = { ok: 0, wrong: [], notTaken: 0, keptAlive: 0 };
      const state = { exited: false, draining: false };
      const loops = Array.from({ length: LOOPS }, (_, i) =>
        requestUntilExit(node.port, state, tally, i % 2 === 0),
      );
      // Let forwarding get going (a live link to node-0), then stop node-1 under it.
      while (tally.ok < 50) await new Promise((resolve) => setTimeout(resolve, 5));
      const signalledAt = Date.now();
      void node.edge.waitFor('draining').then(
        () => (state.draining = true),
        () => undefined,
      );
      node.edge.kill('SIGTERM');
      const exitedInTime = await Promise.race([
        node.edge.exited.then(() => true),
        new Promise<boolean>((resolve) => setTimeout(() => resolve(false), EXIT_WITHIN_MS)),
      ]);
      const exitMs = Date.now() - signalledAt;
      state.exited = true;
      if (!exitedInTime) await node.kill();
      await Promise.all(loops);
      console.info(
        `round ${round}: exited ${exitedInTime ? `after ${exitMs} ms` : `not within ${EXIT_WITHIN_MS} ms`}; ` +
          `${tally.ok} served, ${tally.notTaken} not taken, ${tally.wrong.length} wrong (${tally.wrong.slice(0, 3).join('; ')}), ` +
          `${tally.keptAlive} kept alive while draining`,
      );
      expect(exitedInTime).toBe(true);
      expect(tally.wrong).toEqual([]);
      expect(tally.keptAlive).toBe(0);
      await node.start();
    }
  }, 120_000);
});
