import {
  clusterNodeArgs,
  freePort,
  type RedisServer,
  startHaproxy,
  startRedisServer,
} from '@tunnel2/test-services';
import { type Spawned, spawnCli } from './processes.js';

/**
 * A whole cluster as an operator runs one, on loopback: a real `redis-server`, N `tunnel2 server`
 * processes sharing it, and Debian's HAProxy in front of them, round-robin, for both public traffic and
 * agent WebSockets. Every port is free at start; `stop()` undoes everything. Nodes trust HAProxy
 * (127.0.0.1) for X-Forwarded-For, as a real deployment would.
 */

/** How long `terminate` waits for a node to drain and exit before it calls the node hung. */
const TERMINATE_WITHIN_MS = 20_000;

export const CLUSTER_SECRET = 'cluster-secret-0123456789abcdef0123456789';

export interface ClusterNode {
  readonly id: string;
  /** Public port (also the node URL other nodes forward to). */
  readonly port: number;
  /** Operations port (/readyz, /metrics). */
  readonly adminPort: number;
  readonly edge: Spawned;
  kill(): Promise<void>;
  /** SIGTERM (the node drains) and waits for the process to exit. */
  terminate(): Promise<void>;
  /** Starts the process again on the same ports once it has exited (after `kill` or `terminate`). */
  start(): Promise<void>;
}

export interface Cluster {
  readonly redis: RedisServer;
  readonly nodes: readonly ClusterNode[];
  /** HAProxy's port: public requests and agents both come in here. */
  readonly lbPort: number;
  readonly lbUrl: string;
  stop(): Promise<void>;
}

export interface ClusterOptions {
  nodes?: number;
  /** Extra `tunnel2 server` arguments for every node (e.g. a shorter lease). */
  edgeArgs?: string[];
  /**
   * HAProxy checks each node's /readyz every 100 ms and takes a failing node out at once; connections
   * it could not establish or that closed without an answer are retried on another node. Off by default:
   * with it, a registry outage (every /readyz 503) leaves HAProxy without a server.
   */
  healthChecks?: boolean;
}

export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const redis = await startRedisServer();
  const cleanups: (() => Promise<unknown>)[] = [() => redis.stop()];
  const stop = async (): Promise<void> => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  };
  try {
    const nodes: ClusterNode[] = [];
    for (let i = 0; i < (options.nodes ?? 3); i++) {
      const node = await startNode(redis.url, `node-${i}`, options.edgeArgs ?? []);
      cleanups.push(() => node.kill());
      nodes.push(node);
    }
    const lb = await startHaproxy(
      nodes,
      options.healthChecks === true
        ? { checks: { http: true, interMs: 100, fall: 1, rise: 2 }, serverHeader: true }
        : {},
    );
    cleanups.push(() => lb.stop());
    return { redis, nodes, lbPort: lb.port, lbUrl: lb.url, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

async function startNode(redisUrl: string, id: string, extra: string[]): Promise<ClusterNode> {
  const port = await freePort();
  const adminPort = await freePort();
  const args = [
    'server',
    '--json',
    ...clusterNodeArgs({ redisUrl, id, port, secret: CLUSTER_SECRET }),
    '--trust-proxy',
    '127.0.0.1',
    '--admin-port',
    String(adminPort),
    ...extra,
  ];
  let edge = spawnCli(args);
  const node: ClusterNode = {
    id,
    port,
    adminPort,
    get edge() {
      return edge;
    },
    async kill() {
      edge.kill('SIGKILL');
      await edge.exited;
    },
    async terminate() {
      const stopping = edge;
      stopping.kill('SIGTERM');
      // Beyond the drain's grace (10 s) and teardown: a node still running then is hung, named as such.
      const timer = setTimeout(() => stopping.kill('SIGKILL'), TERMINATE_WITHIN_MS);
      await stopping.exited.finally(() => clearTimeout(timer));
      if (stopping.child.signalCode === 'SIGKILL') {
        throw new Error(
          `${id} did not exit within ${TERMINATE_WITHIN_MS} ms of SIGTERM (killed); stderr: ${stopping.stderr().slice(-2_000)}`,
        );
      }
    },
    async start() {
      if (edge.child.exitCode === null && edge.child.signalCode === null) throw new Error(`${id} still runs`);
      edge = spawnCli(args);
      await edge.waitFor('listening');
    },
  };
  await edge.waitFor('listening');
  return node;
}
