import { randomUUID } from 'node:crypto';
import { buildEdge, type Edge, type EdgeOptions } from '@tunnel2/edge';
import { type RedisServer, startRedisServer } from '@tunnel2/test-services';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createRedisRegistry } from '../../registry/src/redis-registry.js';
import type { SessionRegistry } from '../../registry/src/session-registry.js';
import { connectTcp } from '../src/index.js';
import { silent } from './support/stack.js';
import { portRange, startEchoServer } from './support/tcp-stack.js';
import { CLUSTER_SECRET } from './support/two-nodes.js';

// Issue #29, defect 2: a closed TCP tunnel's port stays reserved for its owner through the grace (60 s),
// and an anonymous owner is only its agent key, new on every connection. One address opening and closing
// tunnels in a loop took every port of the range, and anyone else got 503 TCP_PORTS_EXHAUSTED for as long
// as it kept going. Now ports in their grace count against the owner's limit, and an anonymous agent's
// against its client address: that address never holds more than the limit, live or in grace (its oldest
// reservation is given back to make room), and another address still gets a port.

const RANGE_SIZE = 12;
const LIMIT = 3;
const ROUNDS = 2 * RANGE_SIZE;

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

let target: number;
beforeAll(async () => {
  const echo = await startEchoServer();
  target = echo.port;
  return () => void echo.server.close();
});

/** `tcpPorts`: the nodes of a cluster share one range. */
function edgeOptions(extra: Partial<EdgeOptions> = {}): EdgeOptions {
  return { port: 0, logger: silent, tcpPorts: portRange(RANGE_SIZE), maxTcpPortsPerOwner: LIMIT, ...extra };
}

/**
 * The attack: a real agent (a new anonymous agent key each time) opens a TCP tunnel through `via` and
 * closes it, `ROUNDS` times; `held()` (the ports held now, live or in grace) is read after each round.
 * A round the edge refuses (the previous close not yet seen, so no reservation to give back) goes on.
 */
async function openAndCloseInALoop(via: (round: number) => Edge, held: () => Promise<number>) {
  const most = { held: 0, opened: 0 };
  for (let round = 0; round < ROUNDS; round++) {
    const tunnel = await connectTcp({ target, server: via(round).url, logger: silent }).catch(
      () => undefined,
    );
    if (tunnel !== undefined) {
      most.opened++;
      await tunnel.close(0);
    }
    most.held = Math.max(most.held, await held());
  }
  return most;
}

/** A victim's TCP tunnel claim from another client address: the upgrade's status (101: it got a port). */
function claimFrom(edge: Edge, localAddress: string): Promise<number> {
  const ws = new WebSocket(`${edge.url.replace('http', 'ws')}/_tunnel2/connect?tcp=any`, {
    perMessageDeflate: false,
    localAddress,
    headers: { 'x-tunnel2-agent-key': randomUUID() },
  });
  return new Promise((resolve, reject) => {
    ws.once('open', () => {
      ws.terminate();
      resolve(101);
    });
    ws.once('unexpected-response', (_req, res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.once('error', reject);
  });
}

describe('TCP ports: one address cannot take them all', () => {
  it('single node: the attacking address holds at most its limit; another address gets a port', async () => {
    const edge = buildEdge(edgeOptions());
    await edge.listen();
    cleanups.push(() => edge.close(0));
    const attack = await openAndCloseInALoop(
      () => edge,
      async () => edge.tcp?.size ?? 0,
    );
    // Every port it closed is in its grace (60 s): before, the range was full after RANGE_SIZE rounds.
    expect(attack.opened).toBeGreaterThan(RANGE_SIZE);
    expect(attack.held).toBeLessThanOrEqual(LIMIT);
    expect(await claimFrom(edge, '127.0.0.2')).toBe(101);
  });

  describe('cluster (Redis)', () => {
    let redis: RedisServer;
    beforeAll(async () => {
      redis = await startRedisServer();
    });
    afterAll(() => redis?.stop());

    it('two nodes: the attacking address holds at most its limit across them; another address gets a port', async () => {
      const keyPrefix = `t2hoard:${randomUUID()}:`;
      const tcpPorts = portRange(RANGE_SIZE);
      const registries: SessionRegistry[] = [];
      const node = async (i: number): Promise<Edge> => {
        const registry = await createRedisRegistry({ url: redis.url, keyPrefix });
        registries.push(registry);
        // Each node on its own loopback address, so that both can listen on the whole range.
        const edge = buildEdge(
          edgeOptions({
            host: `127.0.0.${i + 1}`,
            nodeId: `node-${i}`,
            tcpPorts,
            registry,
            cluster: { secret: CLUSTER_SECRET },
          }),
        );
        await edge.listen();
        cleanups.push(async () => {
          await edge.close(0);
          await registry.close();
        });
        return edge;
      };
      const nodes = [await node(0), await node(1)];
      const probe = registries[0]!;
      const heldPorts = async (): Promise<number> =>
        (await probe.list()).filter((record) => record.name.startsWith('tcp:')).length;
      // Alternating nodes: the limit is counted across the cluster, from the registry.
      const attack = await openAndCloseInALoop((round) => nodes[round % 2]!, heldPorts);
      expect(attack.opened).toBeGreaterThan(RANGE_SIZE);
      expect(attack.held).toBeLessThanOrEqual(LIMIT);
      expect(await claimFrom(nodes[1]!, '127.0.0.9')).toBe(101);
    });
  });
});
