import { createHash } from 'node:crypto';
import { createServer, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { createTestBackend, deterministicSha256 } from '@tunnel2/test-backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { connect, type Tunnel } from '../src/index.js';
import { type Cluster, startCluster } from './support/cluster-harness.js';
import { headerValues, send } from './support/http-client.js';
import { startWsBackend, type WsBackend } from './support/ws-backend.js';

// Three `tunnel2 server` processes, a real redis-server and HAProxy round-robin in front of them. Agents
// come in through HAProxy (so they land on whichever node it picks); public requests go to every node
// directly, so for each session two of the three nodes must forward it over the node hop. Which node
// served is visible in x-tunnel2-node (the node holding the agent).

type Backend = Awaited<ReturnType<typeof createTestBackend>>;

let cluster: Cluster;
let backend: Backend;
let wsBackend: WsBackend;
let sse: Server;
const sseResponses: ServerResponse[] = [];
const tunnels: Tunnel[] = [];

beforeAll(async () => {
  cluster = await startCluster({ nodes: 3 });
  backend = await createTestBackend();
  wsBackend = await startWsBackend();
  sse = createServer((req, res) => {
    if (req.url !== '/events') {
      res.end('not the event stream');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write('data: first\n\n');
    // The second event only after the client saw the first: proves nothing buffers until the end.
    res.once('continue-sse', () => res.end('data: second\n\n'));
    sseResponses.push(res);
  });
  await new Promise<void>((resolve) => sse.listen(0, '127.0.0.1', resolve));
  tunnels.push(await connect({ target: backend.port, server: cluster.lbUrl, subdomain: 'shop' }));
  tunnels.push(await connect({ target: wsBackend.port, server: cluster.lbUrl, subdomain: 'wsecho' }));
  tunnels.push(
    await connect({ target: (sse.address() as AddressInfo).port, server: cluster.lbUrl, subdomain: 'sse' }),
  );
}, 30_000);

afterAll(async () => {
  for (const tunnel of tunnels) await tunnel.close(0);
  await cluster?.stop();
  await backend?.close();
  await wsBackend?.close();
  await new Promise<void>((resolve) => (sse ? sse.close(() => resolve()) : resolve()));
});

/** The node holding `name`'s agent, as every node reports it; asserts they all agree. */
async function holderOf(name: string): Promise<string> {
  const seen = new Set<string>();
  for (const node of cluster.nodes) {
    const res = await send({ port: node.port, path: '/probe', headers: ['Host', `${name}.localhost`] });
    // Any backend answer (even its 404) came from the agent: the header names the node holding it.
    expect(res.headers['x-tunnel2-error']).toBeUndefined();
    seen.add(String(res.headers['x-tunnel2-node']));
  }
  expect(seen.size).toBe(1);
  return [...seen][0]!;
}

/** The nodes that do not hold `name`: a request there crosses the node hop. */
async function crossNodes(name: string) {
  const holder = await holderOf(name);
  const others = cluster.nodes.filter((node) => node.id !== holder);
  expect(others).toHaveLength(2);
  return others;
}

describe('three nodes behind HAProxy, one Redis', () => {
  it('agents coming through HAProxy are spread over the nodes (round-robin)', async () => {
    const holders = new Set([await holderOf('shop'), await holderOf('wsecho'), await holderOf('sse')]);
    // Three agents, three round-robin picks: at least two distinct nodes even if a probe took a turn.
    expect(holders.size).toBeGreaterThanOrEqual(2);
  });

  it('routes by host and by path on the nodes that do not hold the session', async () => {
    const holder = await holderOf('shop');
    for (const node of await crossNodes('shop')) {
      const byHost = await send({
        port: node.port,
        path: '/bytes/1000',
        headers: ['Host', `shop.localhost:${node.port}`],
      });
      expect(byHost.status).toBe(200);
      expect(byHost.sha256).toBe(deterministicSha256(1000));
      expect(byHost.headers['x-tunnel2-node']).toBe(holder);
      const byPath = await send({
        port: node.port,
        path: '/session/shop/bytes/1000',
        headers: ['Host', `localhost:${node.port}`],
      });
      expect(byPath.status).toBe(200);
      expect(byPath.sha256).toBe(deterministicSha256(1000));
      expect(byPath.headers['x-tunnel2-node']).toBe(holder);
    }
  });

  it('streams 50 MiB both ways across nodes (SHA-256 checked)', async () => {
    const [node] = await crossNodes('shop');
    const size = 50 * 1024 * 1024;
    const down = await send({
      port: node!.port,
      path: `/bytes/${size}`,
      headers: ['Host', 'shop.localhost'],
      keepBody: false,
    });
    expect(down.status).toBe(200);
    expect(down.length).toBe(size);
    expect(down.sha256).toBe(deterministicSha256(size));
    const hash = createHash('sha256');
    let sent = 0;
    const chunk = Buffer.alloc(64 * 1024);
    const body = new Readable({
      read() {
        if (sent >= size) {
          this.push(null);
          return;
        }
        chunk.writeUInt32BE(sent, 0);
        hash.update(chunk);
        sent += chunk.length;
        this.push(Buffer.from(chunk));
      },
    });
    const up = await send({
      port: node!.port,
      path: '/upload',
      method: 'POST',
      headers: ['Host', 'shop.localhost', 'Content-Type', 'application/octet-stream'],
      body,
    });
    expect(up.status).toBe(200);
    const answer = JSON.parse(up.body.toString()) as { bytes: number; sha256: string };
    expect(answer).toEqual({ bytes: size, sha256: hash.digest('hex') });
  }, 60_000);

  it('relays a WebSocket echo across nodes, directly and through HAProxy', async () => {
    const [node] = await crossNodes('wsecho');
    for (const port of [node!.port, cluster.lbPort, cluster.lbPort, cluster.lbPort]) {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/echo`, { headers: { host: 'wsecho.localhost' } });
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('error', reject);
      });
      const echoed = new Promise<string>((resolve) => ws.once('message', (data) => resolve(String(data))));
      ws.send(`hello via ${port}`);
      expect(await echoed).toBe(`hello via ${port}`);
      ws.close();
      await new Promise((resolve) => ws.once('close', resolve));
    }
  });

  it('relays SSE events as they come, across nodes', async () => {
    const [node] = await crossNodes('sse');
    const events: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const req = request({
        host: '127.0.0.1',
        port: node!.port,
        path: '/events',
        headers: { host: 'sse.localhost' },
      });
      req.on('error', reject);
      req.on('response', (res) => {
        expect(res.headers['content-type']).toBe('text/event-stream');
        res.setEncoding('utf8');
        res.on('data', (text: string) => {
          events.push(text);
          if (events.length === 1) sseResponses.at(-1)?.emit('continue-sse');
        });
        res.on('end', () => resolve());
      });
      req.end();
    });
    expect(events.join('')).toBe('data: first\n\ndata: second\n\n');
  });

  it('through HAProxy, every node tells the backend the same real client (X-Forwarded-For)', async () => {
    const chains = new Set<string>();
    const servedBy = new Set<string>();
    // Six requests, round-robin over three nodes: each node takes two, two of three nodes cross the hop.
    for (let i = 0; i < 6; i++) {
      const seen = await send({
        port: cluster.lbPort,
        path: '/echo/request/xff',
        headers: ['Host', 'shop.localhost', 'X-Forwarded-For', '6.6.6.6'],
      });
      expect(seen.status).toBe(200);
      servedBy.add(String(seen.headers['x-tunnel2-node']));
      const raw = (JSON.parse(seen.body.toString()) as { rawHeaders: string[] }).rawHeaders;
      const xff = headerValues(raw, 'x-forwarded-for');
      expect(xff).toHaveLength(1);
      chains.add(xff[0]!);
      expect(headerValues(raw, 'x-tunnel2-node-auth')).toEqual([]);
    }
    expect(servedBy.size).toBe(1);
    // HAProxy appends the client (127.0.0.1) to what the client sent; the edge trusts HAProxy, keeps the
    // chain and appends HAProxy: the same answer whichever node took the request.
    expect([...chains]).toEqual(['6.6.6.6, 127.0.0.1, 127.0.0.1']);
  });
});
