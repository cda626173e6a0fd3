import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type LoadTarget, startAgentService, startBackendService, startEdgeService } from './bench-stack.js';
import type { ChildService } from './child-service.js';
import { BenchError, BenchErrorCode } from './errors.js';

/*
 * The cluster `pnpm bench cluster` measures, as an operator runs one, on loopback: a real `redis-server`,
 * three `tunnel2 server` processes sharing it, Debian's HAProxy round-robin in front of them for both public
 * traffic and agent WebSockets, the test backend and one agent that connects through HAProxy. Adapted from
 * packages/cli/test/support/cluster-harness.ts (bench must not import test code). Every process is its own,
 * so its CPU is its own; nodes get fixed free ports so a restarted node comes back where HAProxy expects it.
 */

const CLUSTER_SECRET = 'bench-cluster-secret-0123456789abcdef0123';
const REDIS_CANDIDATES = ['/usr/bin/redis-server', '/usr/local/bin/redis-server'];
const HAPROXY_CANDIDATES = ['/usr/sbin/haproxy', '/usr/bin/haproxy', '/usr/local/sbin/haproxy'];
/** Bounds on waiting for redis-server and HAProxy to accept connections (neither has a ready line we use). */
const READY_ATTEMPTS = 400;
const READY_PAUSE_MS = 25;

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

function find(candidates: string[], pkg: string): string {
  const found = candidates.find((path) => existsSync(path));
  if (found === undefined) {
    throw new BenchError(
      BenchErrorCode.STACK,
      `${pkg} is not installed: the cluster bench runs a real one (apt-get install -y ${pkg})`,
    );
  }
  return found;
}

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
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

/** Spawns a non-Node process and waits (bounded) until its port accepts; its output is kept for errors. */
async function spawnListening(
  name: string,
  bin: string,
  args: string[],
  port: number,
): Promise<ChildProcess> {
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (t: string): void => {
    if (output.length < 16_384) output += t;
  };
  child.stdout?.setEncoding('utf8').on('data', keep);
  child.stderr?.setEncoding('utf8').on('data', keep);
  for (let attempt = 0; attempt < READY_ATTEMPTS; attempt++) {
    if (child.exitCode !== null) break;
    if (await accepts(port)) return child;
    await new Promise((resolve) => setTimeout(resolve, READY_PAUSE_MS));
  }
  child.kill('SIGKILL');
  throw new BenchError(BenchErrorCode.STACK, `${name} did not listen on ${port}: ${output.trim()}`);
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

function nodeArgs(redisUrl: string, id: string, port: number): string[] {
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
    '--trust-proxy',
    '127.0.0.1',
  ];
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
  const redisBin = find(REDIS_CANDIDATES, 'redis-server');
  const haproxyBin = find(HAPROXY_CANDIDATES, 'haproxy');
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
    for (const p of procs.splice(0).reverse()) {
      if (p.exitCode === null && p.signalCode === null) {
        const exited = once(p, 'exit');
        p.kill('SIGTERM');
        await exited;
      }
    }
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  };
  try {
    const redisPort = await freePort();
    procs.push(
      await spawnListening(
        'redis-server',
        redisBin,
        ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
        redisPort,
      ),
    );
    const redisUrl = `redis://127.0.0.1:${redisPort}`;
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
