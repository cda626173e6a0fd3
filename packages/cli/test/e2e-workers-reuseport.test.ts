import { execFileSync } from 'node:child_process';
import { type AddressInfo, createServer } from 'node:net';
import { createTestBackend } from '@tunnel2/test-backend';
import { makeTestCa } from '@tunnel2/test-services';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, connectTcp, type Tunnel } from '../src/index.js';
import { send } from './support/http-client.js';
import { type Spawned, spawnCli } from './support/processes.js';
import { silent, until } from './support/stack.js';
import { portRange, sendAndHash, startHashServer } from './support/tcp-stack.js';

// `tunnel2 server --workers 2` on Linux: each worker binds the public port and the TCP ports itself with
// SO_REUSEPORT (the primary holds none of them), and the kernel spreads new connections over the workers.

type Backend = Awaited<ReturnType<typeof createTestBackend>>;

/** The pids listening on a loopback TCP port, as `ss` lists them. */
function listenersOf(port: number): number[] {
  const out = execFileSync('ss', ['-Hltnp', `sport = :${port}`], { encoding: 'utf8' });
  return [...out.matchAll(/pid=(\d+)/g)].map((m) => Number(m[1])).sort((a, b) => a - b);
}

/** The loopback ports a process listens on (`ss`). */
function portsOf(pid: number): Set<number> {
  const out = execFileSync('ss', ['-Hltnp'], { encoding: 'utf8' });
  const ports = new Set<number>();
  for (const line of out.split('\n'))
    if (line.includes(`pid=${pid},`)) ports.add(Number(/:(\d+)\s/.exec(line)?.[1]));
  return ports;
}

/**
 * Resolves once the primary's log (stderr) names `count` workers listening: its `listening` event comes on
 * stdout, another pipe, which may be read first.
 */
async function allWorkersLogged(edge: Spawned, count: number): Promise<void> {
  await until(() => workerPids(edge).length === count, {
    what: `${count} workers logged`,
    timeoutMs: 10_000,
  });
}

/** The worker pids the primary said are listening (its info log). */
function workerPids(edge: Spawned): number[] {
  const pids: number[] = [];
  for (const line of edge.stderr().split('\n')) {
    if (!line.includes('"edge worker listening"')) continue;
    pids.push((JSON.parse(line) as { workerPid: number }).workerPid);
  }
  return pids.sort((a, b) => a - b);
}

/** The sample of `metric` carrying `label`, 0 when there is none. */
function sampleOf(text: string, metric: string, label: string): number {
  let sum = 0;
  for (const line of text.split('\n'))
    if (line.startsWith(`${metric}{`) && line.includes(label))
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

describe.runIf(process.platform === 'linux')('tunnel2 server --workers 2 with SO_REUSEPORT', () => {
  let edge: Spawned;
  let port: number;
  let url: string;
  let adminUrl: string;
  let backend: Backend;
  let hashServer: Awaited<ReturnType<typeof startHashServer>>;
  const tunnels: Tunnel[] = [];

  beforeAll(async () => {
    edge = spawnCli([
      'server',
      '--workers',
      '2',
      '--port',
      '0',
      '--admin-port',
      '0',
      '--tcp-ports',
      portRange(4),
      '--json',
      '--log-level',
      'info',
    ]);
    const listening = await edge.waitFor('listening');
    url = String(listening.url);
    port = Number(new URL(url).port);
    adminUrl = String(listening.adminUrl);
    await allWorkersLogged(edge, 2);
    backend = await createTestBackend();
    hashServer = await startHashServer();
    tunnels.push(await connect({ target: backend.port, server: url, subdomain: 'rp', logger: silent }));
  }, 60_000);

  afterAll(async () => {
    for (const tunnel of tunnels) await tunnel.close(0);
    if (edge !== undefined && edge.child.exitCode === null) {
      edge.kill('SIGKILL');
      await edge.exited;
    }
    await backend?.close();
    await hashServer?.close();
  });

  it('binds port 0 as one port in every worker, the primary holding none', () => {
    const workers = workerPids(edge);
    expect(workers).toHaveLength(2);
    expect(listenersOf(port)).toEqual(workers);
    expect(workers).not.toContain(edge.child.pid);
  });

  it('spreads new connections over both workers (kernel hashing, no hand-off through the primary)', async () => {
    const total = 200;
    for (let i = 0; i < total; i++) {
      // One connection per request: each is placed by the kernel on one worker's socket.
      const res = await send({ port, path: '/loadtest/ping', headers: ['Host', 'rp.localhost'] });
      expect(res.status).toBe(200);
    }
    const text = await (await fetch(`${adminUrl}/metrics`)).text();
    // Requests a worker took from the public port: the holder's own, plus those it carried to the holder.
    const took = [0, 1].map((w) => sampleOf(text, 'tunnel2_http_requests_total', `worker="${w}"`));
    expect(took[0]! + took[1]!).toBeGreaterThanOrEqual(total);
    // Hashing of 200 ephemeral source ports: each worker takes far more than a fifth of them.
    for (const n of took) expect(n).toBeGreaterThan(total / 5);
  });

  it('binds a TCP tunnel port in every worker and carries its connections from either', async () => {
    const tunnel = await connectTcp({ target: hashServer.port, server: url, logger: silent });
    tunnels.push(tunnel);
    const tcpPort = tunnel.info?.tcp?.port ?? 0;
    expect(tcpPort).toBeGreaterThan(0);
    expect(listenersOf(tcpPort)).toEqual(workerPids(edge));
    for (let i = 0; i < 6; i++) {
      const { sent, answer } = await sendAndHash(tcpPort, 32 * 1024);
      expect(answer).toBe(sent);
    }
  });
});

describe.runIf(process.platform === 'linux')(
  'tunnel2 server --workers 2 on a port held with SO_REUSEPORT',
  () => {
    it('refuses the port instead of joining the other process on it, naming the setting, exit 1', async () => {
      // Another process of this user (another edge's worker) bound with SO_REUSEPORT: the workers' own
      // SO_REUSEPORT binds would succeed and the kernel would split the port's traffic between the two.
      const holder = createServer((socket) => socket.end());
      await new Promise<void>((resolve) =>
        holder.listen({ port: 0, host: '127.0.0.1', reusePort: true }, resolve),
      );
      const taken = (holder.address() as AddressInfo).port;
      try {
        const edge = spawnCli(['server', '--workers', '2', '--port', String(taken), '--json']);
        expect(await edge.exited).toBe(1);
        expect(edge.stderr()).toContain(`invalid setting port=${taken}: cannot listen on 127.0.0.1:${taken}`);
        expect(listenersOf(taken)).toEqual([process.pid]);
      } finally {
        holder.close();
      }
    });
  },
);

describe.runIf(process.platform === 'linux')('tunnel2 server --workers 2 --tls-cert … --http-port 0', () => {
  it('binds the redirect port as one port in every worker too, and redirects from either', async () => {
    const ca = await makeTestCa();
    let edge: Spawned | undefined;
    try {
      const pair = await ca.issue('edge', ['localhost']);
      edge = spawnCli([
        'server',
        '--workers',
        '2',
        '--port',
        '0',
        '--http-port',
        '0',
        '--tls-cert',
        pair.certFile,
        '--tls-key',
        pair.keyFile,
        '--json',
        '--log-level',
        'info',
      ]);
      const port = Number(new URL(String((await edge.waitFor('listening')).url)).port);
      await allWorkersLogged(edge, 2);
      const workers = workerPids(edge);
      // Each worker's own link port aside, the ports both hold: the TLS port and the redirect port.
      const [first, ...others] = workers.map(portsOf);
      const shared = [...(first ?? [])].filter((p) => p !== port && others.every((ports) => ports.has(p)));
      expect(
        shared,
        `${workers.join(',')}: ${execFileSync('ss', ['-Hltnp'], { encoding: 'utf8' })}`,
      ).toHaveLength(1);
      const httpPort = shared[0] ?? 0;
      expect(listenersOf(httpPort)).toEqual(workerPids(edge));
      for (let i = 0; i < 10; i++) {
        const res = await send({ port: httpPort, path: '/x', headers: ['Host', 'app.localhost'] });
        expect(res.status).toBe(308);
        expect(String(res.headers.location)).toBe(`https://app.localhost:${port}/x`);
      }
    } finally {
      if (edge !== undefined && edge.child.exitCode === null) {
        edge.kill('SIGKILL');
        await edge.exited;
      }
      await ca.dispose();
    }
  });
});
