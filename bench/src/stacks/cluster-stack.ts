import {
  freePort,
  type Haproxy,
  clusterNodeArgs as nodeFlags,
  type RedisServer,
  startHaproxy,
} from '@tunnel2/test-services';
import { BenchError, BenchErrorCode } from '../errors.js';
import { type LoadTarget, startAgentService, startBackendService, startEdgeService } from './bench-stack.js';
import type { ChildService } from './child-service.js';
import { startNative } from './native-service.js';
import { startRedisServer } from './redis-server.js';

/*
 * The cluster `pnpm bench cluster` measures, as an operator runs one, on loopback: a real `redis-server`,
 * three `tunnel2 server` processes sharing it, Debian's HAProxy round-robin in front of them for both public
 * traffic and agent WebSockets, the test backend and one agent that connects through HAProxy. Redis and
 * HAProxy come from @tunnel2/test-services, as in packages/cli/test/support/cluster-harness.ts. Every process
 * is its own, so its CPU is its own; nodes get fixed free ports so a restarted node comes back where HAProxy
 * expects it.
 */

const CLUSTER_SECRET = 'bench-cluster-secret-0123456789abcdef0123';

export interface ClusterNode {
  readonly id: string;
  readonly port: number;
  /** The running process (a new one after restart()). */
  readonly service: ChildService;
  /** SIGTERM (drain), wait for the exit, start again on the same port. */
  restart(): Promise<void>;
  /** kill -9, no restart. */
  kill(): void;
}

export interface ClusterStack {
  nodes: ClusterNode[];
  backend: ChildService;
  agent: ChildService;
  /** The tunnel's host (routing is by Host); targets are node origins or the load balancer's. */
  host: string;
  lb: LoadTarget;
  nodeTarget(node: ClusterNode): LoadTarget;
  close(): Promise<void>;
  kill(): void;
}

/** `tunnel2 server` arguments of one cluster node on a fixed port (the sessions bench runs one alone). */
export function clusterNodeArgs(redisUrl: string, id: string, port: number): string[] {
  return nodeFlags({ redisUrl, id, port, secret: CLUSTER_SECRET });
}

function nodeArgs(redisUrl: string, id: string, port: number): string[] {
  return [...clusterNodeArgs(redisUrl, id, port), '--trust-proxy', '127.0.0.1'];
}

async function startNode(redisUrl: string, id: string): Promise<ClusterNode> {
  const port = await freePort();
  let service = await startEdgeService(nodeArgs(redisUrl, id, port));
  return {
    id,
    port,
    get service() {
      return service;
    },
    async restart() {
      await service.stop(30_000);
      service = await startEdgeService(nodeArgs(redisUrl, id, port));
    },
    kill() {
      service.kill();
    },
  };
}

export async function startClusterStack(nodeCount: number, subdomain: string): Promise<ClusterStack> {
  let redis: RedisServer | undefined;
  let lb: Haproxy | undefined;
  const services: (() => ChildService | undefined)[] = [];
  const nodes: ClusterNode[] = [];
  const kill = (): void => {
    for (const get of services) get()?.kill();
    lb?.kill();
    redis?.kill();
  };
  const close = async (): Promise<void> => {
    // Agent first, then nodes, then HAProxy and Redis: nothing sees its peer vanish first.
    for (const get of services.splice(0).reverse()) await get()?.stop();
    await lb?.stop();
    await redis?.stop();
  };
  try {
    redis = await startRedisServer();
    const redisUrl = redis.url;
    const backend = await startBackendService();
    services.push(() => backend);
    for (let i = 0; i < nodeCount; i++) {
      const node = await startNode(redisUrl, `node-${i}`);
      nodes.push(node);
      services.push(() => node.service);
    }
    // A dead node is taken out after one failed check (a TCP connect every 500 ms), as an operator's LB would.
    lb = await startNative('haproxy', () =>
      startHaproxy(nodes, { checks: { http: false, interMs: 500, fall: 1, rise: 1 }, maxconn: 4000 }),
    );
    const agent = await startAgentService(backend.readyValue, lb.url, subdomain);
    services.push(() => agent);
    const host = new URL(agent.readyValue).host;
    return {
      nodes,
      backend,
      agent,
      host,
      lb: { origin: lb.url, host },
      nodeTarget: (node) => ({ origin: `http://127.0.0.1:${node.port}`, host }),
      close,
      kill,
    };
  } catch (err) {
    await close();
    if (err instanceof BenchError) throw err;
    throw new BenchError(BenchErrorCode.STACK, 'the cluster did not start', { cause: err });
  }
}
