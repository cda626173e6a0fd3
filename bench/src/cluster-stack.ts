import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type LoadTarget, startAgentService, startBackendService, startEdgeService } from './bench-stack.js';
import type { ChildService } from './child-service.js';
import { BenchError, BenchErrorCode } from './errors.js';
import { findBinary, freePort, spawnListening, stopNative } from './native-service.js';
import { startRedisServer } from './redis-server.js';

/*
 * The cluster `pnpm bench cluster` measures, as an operator runs one, on loopback: a real `redis-server`,
 * three `tunnel2 server` processes sharing it, Debian's HAProxy round-robin in front of them for both public
 * traffic and agent WebSockets, the test backend and one agent that connects through HAProxy. Adapted from
 * packages/cli/test/support/cluster-harness.ts (bench must not import test code). Every process is its own,
 * so its CPU is its own; nodes get fixed free ports so a restarted node comes back where HAProxy expects it.
 */

const CLUSTER_SECRET = 'bench-cluster-secret-0123456789abcdef0123';
const HAPROXY_CANDIDATES = ['/usr/sbin/haproxy', '/usr/bin/haproxy', '/usr/local/sbin/haproxy'];

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

function haproxyConfig(lbPort: number, nodePorts: readonly number[]): string {
  return [
    'global',
    '  maxconn 4000',
    'defaults',
    '  mode http',
    '  timeout connect 5s',
    '  timeout client 60s',
    '  timeout server 60s',
    '  timeout tunnel 1h',
    '  option forwardfor',
    // A connection refused by a stopping node is retried on another one, as an operator's LB is set up.
    '  retries 3',
    '  option redispatch 1',
    // A keep-alive connection the stopping node closes just as a request goes out on it is retried too.
    '  retry-on conn-failure empty-response',
    // A check slowed by a busy machine is not a dead node.
    '  timeout check 2s',
    'frontend public',
    `  bind 127.0.0.1:${lbPort}`,
    '  default_backend edges',
    'backend edges',
    '  balance roundrobin',
    // A dead node is taken out after a failed check, as an operator's LB would.
    ...nodePorts.map((port, i) => `  server n${i} 127.0.0.1:${port} check inter 500 fall 1 rise 1`),
    '',
  ].join('\n');
}

/** `tunnel2 server` arguments of one cluster node on a fixed port (the sessions bench runs one alone). */
export function clusterNodeArgs(redisUrl: string, id: string, port: number): string[] {
  return [
    '--port',
    String(port),
    '--registry',
    redisUrl,
    '--node-id',
    id,
    '--node-url',
    `http://127.0.0.1:${port}`,
    '--cluster-secret',
    CLUSTER_SECRET,
  ];
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
  const haproxyBin = findBinary(HAPROXY_CANDIDATES, 'haproxy');
  const procs: ChildProcess[] = [];
  const services: (() => ChildService | undefined)[] = [];
  const nodes: ClusterNode[] = [];
  let dir: string | undefined;
  const kill = (): void => {
    for (const get of services) get()?.kill();
    for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  };
  const close = async (): Promise<void> => {
    // Agent first, then nodes, then HAProxy and Redis: nothing sees its peer vanish first.
    for (const get of services.splice(0).reverse()) await get()?.stop();
    for (const p of procs.splice(0).reverse()) await stopNative(p);
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  };
  try {
    const redis = await startRedisServer();
    procs.push(redis.process);
    const redisUrl = redis.url;
    const backend = await startBackendService();
    services.push(() => backend);
    for (let i = 0; i < nodeCount; i++) {
      const node = await startNode(redisUrl, `node-${i}`);
      nodes.push(node);
      services.push(() => node.service);
    }
    const lbPort = await freePort();
    dir = await mkdtemp(join(tmpdir(), 'tunnel2-bench-haproxy-'));
    const configPath = join(dir, 'haproxy.cfg');
    await writeFile(
      configPath,
      haproxyConfig(
        lbPort,
        nodes.map((n) => n.port),
      ),
    );
    procs.push(await spawnListening('haproxy', haproxyBin, ['-db', '-f', configPath], lbPort));
    const lbUrl = `http://127.0.0.1:${lbPort}`;
    const agent = await startAgentService(backend.readyValue, lbUrl, subdomain);
    services.push(() => agent);
    const host = new URL(agent.readyValue).host;
    return {
      nodes,
      backend,
      agent,
      host,
      lb: { origin: lbUrl, host },
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
