import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestRedisServer, type TestRedisServer } from '../../../registry/test/redis-server.js';
import { type Spawned, spawnCli } from './processes.js';

/**
 * A whole cluster as an operator runs one, on loopback: a real `redis-server`, N `tunnel2 server`
 * processes sharing it, and Debian's HAProxy in front of them, round-robin, for both public traffic and
 * agent WebSockets. Every port is free at start; HAProxy's config lives in a temp dir; `stop()` undoes
 * everything. Nodes trust HAProxy (127.0.0.1) for X-Forwarded-For, as a real deployment would.
 */

export const CLUSTER_SECRET = 'cluster-secret-0123456789abcdef0123456789';

const HAPROXY_CANDIDATES = ['/usr/sbin/haproxy', '/usr/bin/haproxy', '/usr/local/sbin/haproxy'];
/** Bounds on waiting for HAProxy to accept connections (it has no "ready" line in the foreground). */
const LB_READY_ATTEMPTS = 200;
const LB_READY_PAUSE_MS = 25;

export interface ClusterNode {
  readonly id: string;
  /** Public port (also the node URL other nodes forward to). */
  readonly port: number;
  /** Operations port (/readyz, /metrics). */
  readonly adminPort: number;
  readonly edge: Spawned;
  /** Starts the node's process again on the same ports (after `kill`). */
  restart(): Promise<void>;
  kill(): Promise<void>;
  /** SIGTERM (the node drains) and waits for the process to exit. */
  terminate(): Promise<void>;
  /** Starts the process again on the same ports once it has exited (after `terminate`). */
  start(): Promise<void>;
}

export interface Cluster {
  readonly redis: TestRedisServer;
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

/** Where HAProxy checks a node's health (its operations port). */
export interface LbNode {
  port: number;
  adminPort: number;
}

export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function findHaproxy(): string {
  const found = HAPROXY_CANDIDATES.find((path) => existsSync(path));
  if (found === undefined) {
    throw new Error(
      'haproxy is not installed: the load-balancer tests run a real one. Install it with ' +
        '`apt-get install -y haproxy` (Debian package; .ci/run does it).',
    );
  }
  return found;
}

/** `mode http` round-robin for everything; `timeout tunnel` keeps agent WebSockets and SSE open. */
export function haproxyConfig(
  lbPort: number,
  nodePorts: readonly number[],
  checked?: readonly LbNode[],
): string {
  const servers =
    checked === undefined
      ? nodePorts.map((port, i) => `  server n${i} 127.0.0.1:${port}`)
      : [
          '  option httpchk GET /readyz',
          '  option redispatch 1',
          '  retries 3',
          // A stopped node refuses connections; a killed one closes them unanswered: neither loses a request
          // that had not reached a backend yet.
          '  retry-on conn-failure empty-response',
          // A check slowed by a busy machine is not a dead node (a stopped one refuses at once).
          '  timeout check 2s',
          // Which node HAProxy sent a request to (n0, n1, ...): a test waits until a restarted node is back.
          '  http-response set-header x-lb-server %s',
          ...checked.map(
            (node, i) =>
              `  server n${i} 127.0.0.1:${node.port} check port ${node.adminPort} inter 100 fall 1 rise 2`,
          ),
        ];
  return [
    'global',
    '  maxconn 2000',
    'defaults',
    '  mode http',
    '  timeout connect 5s',
    '  timeout client 60s',
    '  timeout server 60s',
    '  timeout tunnel 1h',
    '  option forwardfor',
    'frontend public',
    `  bind 127.0.0.1:${lbPort}`,
    '  default_backend edges',
    'backend edges',
    '  balance roundrobin',
    ...servers,
    '',
  ].join('\n');
}

async function accepts(port: number): Promise<boolean> {
  const socket = new Socket();
  try {
    socket.connect(port, '127.0.0.1');
    await once(socket, 'connect');
    return true;
  } catch {
    return false;
  } finally {
    socket.destroy();
  }
}

export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const haproxy = findHaproxy();
  const redis = await startTestRedisServer();
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
    const lbPort = await freePort();
    const dir = await mkdtemp(join(tmpdir(), 'tunnel2-haproxy-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const configPath = join(dir, 'haproxy.cfg');
    await writeFile(
      configPath,
      haproxyConfig(
        lbPort,
        nodes.map((n) => n.port),
        options.healthChecks === true ? nodes : undefined,
      ),
    );
    const lb: ChildProcess = spawn(haproxy, ['-db', '-f', configPath], { stdio: ['ignore', 'pipe', 'pipe'] });
    let lbOutput = '';
    lb.stdout?.setEncoding('utf8').on('data', (t: string) => {
      if (lbOutput.length < 16_384) lbOutput += t;
    });
    lb.stderr?.setEncoding('utf8').on('data', (t: string) => {
      if (lbOutput.length < 16_384) lbOutput += t;
    });
    const lbExited = once(lb, 'exit');
    cleanups.push(async () => {
      if (lb.exitCode === null && lb.signalCode === null) lb.kill('SIGKILL');
      await lbExited;
    });
    let ready = false;
    for (let attempt = 0; attempt < LB_READY_ATTEMPTS && !ready; attempt++) {
      if (lb.exitCode !== null) throw new Error(`haproxy exited with ${lb.exitCode}: ${lbOutput}`);
      ready = await accepts(lbPort);
      if (!ready) await new Promise((resolve) => setTimeout(resolve, LB_READY_PAUSE_MS));
    }
    if (!ready) throw new Error(`haproxy did not listen on ${lbPort}: ${lbOutput}`);
    return { redis, nodes, lbPort, lbUrl: `http://127.0.0.1:${lbPort}`, stop };
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
    '--port',
    String(port),
    '--json',
    '--registry',
    redisUrl,
    '--node-id',
    id,
    '--node-url',
    `http://127.0.0.1:${port}`,
    '--cluster-secret',
    CLUSTER_SECRET,
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
    async restart() {
      await node.kill();
      edge = spawnCli(args);
      await edge.waitFor('listening');
    },
    async kill() {
      edge.kill('SIGKILL');
      await edge.exited;
    },
    async terminate() {
      edge.kill('SIGTERM');
      await edge.exited;
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
