import { once } from 'node:events';
import { connect } from 'node:net';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { buildEdge, type Edge } from '../src/build-edge.js';
import { createEdgeMetrics } from '../src/operations/metrics.js';
import { freeRange } from './support/free-range.js';

// The agent endpoint claims a name (and a TCP port) before it hands the socket to `ws` for the WebSocket
// handshake. `ws` may then refuse the handshake (a bad Sec-WebSocket-Key or version) or find the socket
// gone, and call nothing back: what was claimed must be given back all the same, on one node and in a
// cluster (where the claim is a registry record).

const silent = pino({ level: 'silent' });
const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function freeRangeText(size: number): Promise<string> {
  const { first, last } = await freeRange(size);
  return `${first}-${last}`;
}

async function startEdge(mode: 'single' | 'cluster'): Promise<Edge> {
  const edge = buildEdge({
    port: 0,
    host: '127.0.0.1',
    logger: silent,
    tcpPorts: await freeRangeText(2),
    ...(mode === 'cluster' ? { nodeId: 'node-a', cluster: { secret: 'x'.repeat(32) } } : {}),
  });
  await edge.listen();
  cleanups.push(() => edge.close(0));
  return edge;
}

/** What a raw client does to the agent door: one upgrade request, then `after` (keep waiting, or go away). */
async function upgrade(
  edge: Edge,
  query: string,
  headers: Record<string, string>,
  after: 'read' | 'reset',
): Promise<string> {
  const socket = connect({ port: Number(new URL(edge.url).port), host: '127.0.0.1' });
  await once(socket, 'connect');
  const lines = [
    `GET ${edge.options.agentPath}?${query} HTTP/1.1`,
    'Host: 127.0.0.1',
    'Upgrade: websocket',
    'Connection: Upgrade',
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
  ];
  socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  if (after === 'reset') {
    socket.resetAndDestroy();
    return '';
  }
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  socket.on('error', () => {});
  await once(socket, 'close');
  return Buffer.concat(chunks).toString('latin1');
}

/** Nothing held: no port on this node, no record of the name or of either port in the registry. */
async function nothingHeld(edge: Edge, name: string, range: readonly number[]): Promise<boolean> {
  const registry = edge.options.registry;
  const records = await Promise.all([
    registry.lookup(name),
    ...range.map((port) => registry.lookup(`tcp:${port}`)),
  ]);
  return edge.tcp?.size === 0 && records.every((record) => record === undefined);
}

/** The edge's TCP range. */
function rangeOf(edge: Edge): { first: number; last: number } {
  const range = edge.options.tcpPorts;
  if (range === undefined) throw new Error('no TCP range');
  return range;
}

/** Polls `check` until it holds, bounded in count (the release is asynchronous in a cluster). */
async function eventually(check: () => Promise<boolean>): Promise<boolean> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return false;
}

const VALID_KEY = 'dGhlIHNhbXBsZSBub25jZQ==';
const refusals = [
  {
    why: 'a bad Sec-WebSocket-Key',
    headers: { 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': 'short' },
  },
  {
    why: 'an unsupported version',
    headers: { 'Sec-WebSocket-Version': '12', 'Sec-WebSocket-Key': VALID_KEY },
  },
];

describe.each(['single', 'cluster'] as const)(
  'an agent upgrade that fails after its claim (%s node)',
  (mode) => {
    it.each(refusals)('gives the name and the TCP port back when ws refuses $why', async ({ headers }) => {
      const edge = await startEdge(mode);
      const metrics = createEdgeMetrics(edge, '0.0.0-test');
      cleanups.push(() => metrics.close());
      const { first, last } = rangeOf(edge);
      const answer = await upgrade(edge, `name=leaky&tcp=${first}`, headers, 'read');
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
      expect(await eventually(() => nothingHeld(edge, 'leaky', [first, last]))).toBe(true);
      expect((await metrics.render()).body).toMatch(/^tunnel2_tcp_ports_held 0$/m);
      // The port can be claimed again, by anyone.
      const again = await edge.tcp?.claim('someone-else', first);
      expect(again?.ok).toBe(true);
    });

    it('gives them back when the client goes away during the claim', async () => {
      const edge = await startEdge(mode);
      const { first, last } = rangeOf(edge);
      for (let i = 0; i < 5; i++)
        await upgrade(
          edge,
          `name=gone&tcp=${first}`,
          { 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': VALID_KEY },
          'reset',
        );
      expect(await eventually(() => nothingHeld(edge, 'gone', [first, last]))).toBe(true);
    });
  },
);
