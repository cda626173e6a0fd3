import { once } from 'node:events';
import { request } from 'node:http';
import { createServer, connect as netConnect } from 'node:net';
import { buildEdge, createEdgeMetrics } from '@tunnel2/edge';
import { freePort } from '@tunnel2/test-services';
import { afterEach, describe, expect, it } from 'vitest';
import { connectTcp, type TcpConnectionReport } from '../src/index.js';
import { spawnCli } from './support/processes.js';
import { silent, until } from './support/stack.js';
import {
  howItEnds,
  portRange,
  sendAndHash,
  startHashServer,
  startHoldingServer,
  startTcpStack,
  type TcpStack,
} from './support/tcp-stack.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A hash server, an edge with a TCP range, and the real CLI's `tunnel2 tcp` to the server. */
async function cliTunnel(args: (backendPort: number) => string[]) {
  const backend = await startHashServer();
  cleanups.push(backend.close);
  const edge = buildEdge({ port: 0, logger: silent, tcpPorts: portRange() });
  await edge.listen();
  cleanups.push(() => edge.close(0));
  const agent = spawnCli(['tcp', ...args(backend.port), '--server', edge.url]);
  cleanups.push(async () => {
    agent.kill('SIGINT');
    await agent.exited;
  });
  return { backend, agent };
}

async function hashStack(options: Parameters<typeof startTcpStack>[1] = {}): Promise<TcpStack> {
  const backend = await startHashServer();
  cleanups.push(backend.close);
  const stack = await startTcpStack(backend.port, options);
  cleanups.push(stack.close);
  return stack;
}

describe('TCP tunnels', () => {
  it('announces tcp://host:port and carries bytes both ways exactly, with the half-close', async () => {
    const stack = await hashStack();
    expect(stack.tunnel.url).toBe(`tcp://localhost:${stack.port}`);
    const reports: TcpConnectionReport[] = [];
    stack.tunnel.on('connection', (r) => reports.push(r));
    // The client half-closes after sending; the digest comes back on the still-open other direction.
    const { sent, answer } = await sendAndHash(stack.port, 8 * 1024 * 1024 + 17);
    expect(answer).toBe(sent);
    await until(() => reports.length === 1);
    expect(reports[0]).toMatchObject({ outcome: 'closed', bytesIn: 8 * 1024 * 1024 + 17, bytesOut: 64 });
    expect(reports[0]?.clientAddress).toBe('127.0.0.1');
    await until(() => stack.edge.tcp?.counters.open === 0);
    expect(stack.edge.tcp?.counters.connections.accepted).toBe(1);
    expect(stack.edge.tcp?.counters.bytes).toEqual({ in: 8 * 1024 * 1024 + 17, out: 64 });
  });

  it('carries 500 concurrent connections, each answered with its own digest', async () => {
    const stack = await hashStack();
    const results = await Promise.all(
      Array.from({ length: 500 }, (_, i) => sendAndHash(stack.port, 1000 + i)),
    );
    for (const { sent, answer } of results) expect(answer).toBe(sent);
  });

  it('resets the client at once when the target refuses, and reports it', async () => {
    const closedPort = await freePort();
    const stack = await startTcpStack(closedPort);
    cleanups.push(stack.close);
    const reports: TcpConnectionReport[] = [];
    stack.tunnel.on('connection', (r) => reports.push(r));
    const socket = netConnect({ port: stack.port, host: '127.0.0.1' });
    expect(await howItEnds(socket)).toBe('ECONNRESET');
    await until(() => reports.length === 1);
    expect(reports[0]).toMatchObject({ outcome: 'refused', error: 'ECONNREFUSED' });
  });

  it('resets the agent side when the client resets, and the client when the target resets', async () => {
    const target = await startHoldingServer();
    cleanups.push(target.close);
    const stack = await startTcpStack(target.port);
    cleanups.push(stack.close);
    const first = netConnect({ port: stack.port, host: '127.0.0.1' });
    first.write('x');
    await until(() => target.latest() !== undefined);
    const targetSaw = howItEnds(target.latest()!);
    first.resetAndDestroy();
    expect(await targetSaw).toBe('ECONNRESET');
    target.forget();
    const second = netConnect({ port: stack.port, host: '127.0.0.1' });
    const clientSaw = howItEnds(second);
    second.write('y');
    await until(() => target.latest() !== undefined);
    target.latest()!.resetAndDestroy();
    expect(await clientSaw).toBe('ECONNRESET');
  });

  it('closes connections from addresses outside --allow-ip at once and counts them', async () => {
    const stack = await hashStack({ tunnel: { allowIps: ['10.0.0.0/8'] } });
    const socket = netConnect({ port: stack.port, host: '127.0.0.1' });
    expect(await howItEnds(socket)).toBe('ECONNRESET');
    expect(stack.edge.tcp?.counters.connections.forbidden).toBe(1);
    const metrics = createEdgeMetrics(stack.edge, '0.0.0-test');
    cleanups.push(async () => metrics.close());
    const { body } = await metrics.render();
    expect(body).toContain('tunnel2_tcp_connections_total{outcome="forbidden"} 1');
    expect(body).toContain('tunnel2_tcp_connections_total{outcome="accepted"} 0');
    expect(body).toContain('tunnel2_tcp_connections_open 0');
    expect(body).toContain('tunnel2_tcp_bytes_total{direction="in"} 0');
    const allowed = await hashStack({ tunnel: { allowIps: ['127.0.0.1/32'] } });
    const { sent, answer } = await sendAndHash(allowed.port, 1000);
    expect(answer).toBe(sent);
  });

  it('keeps the port across a reconnect', async () => {
    const stack = await hashStack({ tunnel: { reconnect: { initialMs: 10, maxMs: 50 } } });
    const before = stack.port;
    const ready = once(stack.tunnel, 'ready');
    for (const connection of stack.edge.sessions.connections()) connection.close(undefined, 'test drops it');
    const [info] = (await ready) as [{ tcp?: { port: number } }];
    expect(info.tcp?.port).toBe(before);
    const { sent, answer } = await sendAndHash(before, 4096);
    expect(answer).toBe(sent);
  });

  it('gives a requested port, and refuses it to another token while held', async () => {
    const port = await freePort();
    const backend = await startHashServer();
    cleanups.push(backend.close);
    const edge = buildEdge({
      port: 0,
      logger: silent,
      tcpPorts: `${port}-${port}`,
      auth: { tokens: ['a', 'b'] },
    });
    await edge.listen();
    cleanups.push(() => edge.close(0));
    const first = await connectTcp({ target: backend.port, server: edge.url, token: 'a', remotePort: port });
    cleanups.push(() => first.close(0));
    expect(first.url).toBe(`tcp://localhost:${port}`);
    await expect(
      connectTcp({ target: backend.port, server: edge.url, token: 'b', remotePort: port }),
    ).rejects.toMatchObject({ edgeCode: 'TUNNEL2_ERR_TCP_PORT_UNAVAILABLE', status: 409, fatal: true });
    // Any port: the one-port range is used up.
    await expect(connectTcp({ target: backend.port, server: edge.url, token: 'b' })).rejects.toMatchObject({
      edgeCode: 'TUNNEL2_ERR_TCP_PORTS_EXHAUSTED',
      status: 503,
    });
  });

  it('refuses a port another process holds, a port outside the range, and more ports than the limit', async () => {
    const holder = createServer();
    holder.listen(0, '127.0.0.1');
    await once(holder, 'listening');
    cleanups.push(async () => void holder.close());
    const held = (holder.address() as { port: number }).port;
    const edge = buildEdge({ port: 0, logger: silent, tcpPorts: `${held}-${held}`, maxTcpPortsPerOwner: 1 });
    await edge.listen();
    cleanups.push(() => edge.close(0));
    await expect(connectTcp({ target: 1, server: edge.url, remotePort: held })).rejects.toMatchObject({
      edgeCode: 'TUNNEL2_ERR_TCP_PORT_UNAVAILABLE',
    });
    await expect(connectTcp({ target: 1, server: edge.url, remotePort: held + 1 })).rejects.toMatchObject({
      edgeCode: 'TUNNEL2_ERR_TCP_PORT_UNAVAILABLE',
    });
    expect(edge.tcp?.size).toBe(0);
  });

  it('limits the ports one token holds', async () => {
    const backend = await startHashServer();
    cleanups.push(backend.close);
    const stack = await startTcpStack(backend.port, {
      edge: { maxTcpPortsPerOwner: 1, auth: { tokens: ['a'] } },
      tunnel: { token: 'a' },
    });
    cleanups.push(stack.close);
    await expect(
      connectTcp({ target: backend.port, server: stack.edge.url, token: 'a' }),
    ).rejects.toMatchObject({
      edgeCode: 'TUNNEL2_ERR_TOO_MANY_TCP_PORTS',
      status: 429,
    });
  });

  it('refuses a TCP tunnel on an edge without --tcp-ports, and opens no port', async () => {
    const edge = buildEdge({ port: 0, logger: silent });
    await edge.listen();
    cleanups.push(() => edge.close(0));
    expect(edge.tcp).toBeUndefined();
    await expect(connectTcp({ target: 1, server: edge.url })).rejects.toMatchObject({
      edgeCode: 'TUNNEL2_ERR_TCP_DISABLED',
      fatal: true,
    });
  });

  it('tunnel2 tcp --json prints ready with the tcp:// URL and a connection event per connection', async () => {
    const { backend, agent } = await cliTunnel((port) => [String(port), '--json']);
    const ready = await agent.waitFor('ready');
    expect(ready.url).toMatch(/^tcp:\/\/localhost:\d+$/);
    expect(ready.target).toBe(`localhost:${backend.port}`);
    const { sent, answer } = await sendAndHash(Number(new URL(String(ready.url)).port), 5000);
    expect(answer).toBe(sent);
    const connection = await agent.waitFor('connection');
    expect(connection).toMatchObject({
      clientAddress: '127.0.0.1',
      bytesIn: 5000,
      bytesOut: 64,
      outcome: 'closed',
    });
    expect(typeof connection.durationMs).toBe('number');
  });

  it('tunnel2 tcp prints tcp://<host>:<port> -> <target> and one line per connection', async () => {
    const { backend, agent } = await cliTunnel((port) => [`127.0.0.1:${port}`]);
    const banner = await agent.waitFor('text');
    const match = /^tunnel2: forwarding tcp:\/\/localhost:(\d+) -> 127\.0\.0\.1:(\d+)$/.exec(
      String(banner.line),
    );
    expect(match?.[2]).toBe(String(backend.port));
    await sendAndHash(Number(match?.[1]), 100);
    await until(() =>
      agent.events.some((e) =>
        / {2}127\.0\.0\.1:\d+ {2}in 100 B {2}out 64 B {2}[\d.]+ ms$/.test(String(e.line)),
      ),
    );
  });

  it("a TCP tunnel's session name serves no HTTP: 404, and the agent is not bothered", async () => {
    const stack = await hashStack();
    const name = stack.tunnel.info?.name ?? '';
    const edgePort = Number(new URL(stack.edge.url).port);
    const answer = await new Promise<{ status: number; code: unknown }>((resolve, reject) => {
      const req = request({
        host: '127.0.0.1',
        port: edgePort,
        path: '/',
        headers: { host: `${name}.localhost` },
      });
      req.on('response', (res) => {
        res.resume();
        resolve({ status: res.statusCode ?? 0, code: res.headers['x-tunnel2-error'] });
      });
      req.on('error', reject);
      req.end();
    });
    expect(answer).toEqual({ status: 404, code: 'TUNNEL2_ERR_UNKNOWN_SESSION' });
  });

  it("refuses a connection beyond the session's stream limit at once, and counts it", async () => {
    const target = await startHoldingServer();
    cleanups.push(target.close);
    const stack = await startTcpStack(target.port, { edge: { maxStreamsPerSession: 1 } });
    cleanups.push(stack.close);
    const first = netConnect({ port: stack.port, host: '127.0.0.1' });
    first.on('error', () => {});
    cleanups.push(async () => void first.destroy());
    await until(() => target.latest() !== undefined);
    const second = netConnect({ port: stack.port, host: '127.0.0.1' });
    expect(await howItEnds(second)).toBe('ECONNRESET');
    expect(stack.edge.tcp?.counters.connections).toMatchObject({ accepted: 1, refused: 1 });
  });

  it('a second agent with the same token takes the port over, and the first one stops for good', async () => {
    const port = await freePort();
    const stack = await hashStack({
      edge: { tcpPorts: `${port}-${port}`, auth: { tokens: ['t'] } },
      tunnel: { remotePort: port, token: 't' },
    });
    const stopped = new Promise((resolve) => stack.tunnel.once('error', resolve));
    const second = await connectTcp({ target: 1, server: stack.edge.url, remotePort: port, token: 't' });
    cleanups.push(() => second.close(0));
    expect(second.url).toBe(`tcp://localhost:${port}`);
    expect(await stopped).toMatchObject({ code: 'TUNNEL2_ERR_REPLACED', fatal: true });
  });
});
