import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WindowBudget } from '@tunnel2/protocol';
import { createMemoryRegistry } from '@tunnel2/registry';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { SessionTable } from '../src/agents/session-table.js';
import { NodeLinkServer } from '../src/cluster/link/node-link-server.js';
import { LINK_PATH, NodeAuth } from '../src/cluster/node-auth.js';
import { InFlight } from '../src/exchange/in-flight.js';
import { NODE_AUTH_HEADER } from '../src/public/cross-node.js';

const SECRET = 'a-cluster-secret-of-at-least-32-characters';
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Node B's link endpoint alone, on a plain HTTP server, remembering at most `maxNonces` link nonces. */
async function linkEndpoint(maxNonces: number): Promise<{ port: number; forged: () => number }> {
  const logger = pino({ level: 'silent' });
  const sessions = new SessionTable({
    registry: createMemoryRegistry(),
    nodeId: 'node-b',
    leaseTtlMs: 60_000,
    reconnectGraceMs: 1_000,
    maxArrivalWaiters: 8,
    logger,
  });
  let forged = 0;
  const links = new NodeLinkServer({
    nodeId: 'node-b',
    auth: new NodeAuth(SECRET),
    sessions,
    inFlight: new InFlight(),
    maxRequestBodyBytes: 1 << 20,
    maxMessageSize: 1 << 20,
    protocol: {},
    windowBudget: new WindowBudget(1 << 20),
    logger,
    onForged: () => forged++,
    isListening: () => true,
    helloTimeoutMs: 10_000,
    maxNonces,
  });
  const server = createServer();
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) =>
    links.handleUpgrade(req, socket, head),
  );
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(() => sessions.close());
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  cleanups.push(() => links.close());
  return { port: (server.address() as { port: number }).port, forged: () => forged };
}

/** The answer to a link upgrade with this signature: 101 (kept open until the test ends) or the status. */
function upgrade(port: number, value: string): Promise<{ status: number; error?: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}${LINK_PATH}`, {
      headers: { host: `127.0.0.1:${port}`, [NODE_AUTH_HEADER]: value },
    });
    cleanups.push(() => ws.terminate());
    ws.once('unexpected-response', (req, res: IncomingMessage) => {
      res.resume();
      req.destroy();
      resolve({ status: res.statusCode ?? 0, error: res.headers['x-tunnel2-error'] as string | undefined });
    });
    ws.once('open', () => resolve({ status: 101 }));
    ws.once('error', reject);
  });
}

describe('NodeLinkServer', () => {
  it('refuses new links 503 once it remembers its most nonces, and still refuses a replay 403', async () => {
    const { port, forged } = await linkEndpoint(2);
    const auth = new NodeAuth(SECRET);
    const sign = (): string => auth.signLink('node-a', 'node-b', `127.0.0.1:${port}`).value;
    const first = sign();
    expect(await upgrade(port, first)).toEqual({ status: 101 });
    expect(await upgrade(port, sign())).toEqual({ status: 101 });
    // Full: a fresh, valid link waits for nonces to expire rather than the set growing or forgetting one.
    expect(await upgrade(port, sign())).toEqual({ status: 503, error: 'TUNNEL2_ERR_NODE_LINK_BUSY' });
    expect(await upgrade(port, first)).toEqual({ status: 403, error: 'TUNNEL2_ERR_NODE_AUTH_INVALID' });
    expect(forged()).toBe(1);
  });

  it('answers 421 to a genuine link signed for another node id, uncounted; a forged one for it is still 403', async () => {
    const { port, forged } = await linkEndpoint(1);
    const host = `127.0.0.1:${port}`;
    // Node A still names the node that was at this address before (B restarted with a new id).
    const stale = new NodeAuth(SECRET).signLink('node-a', 'node-b-before', host).value;
    for (let i = 0; i < 2; i++)
      expect(await upgrade(port, stale)).toEqual({ status: 421, error: 'TUNNEL2_ERR_NODE_LINK_MISDIRECTED' });
    expect(forged()).toBe(0);
    // Another secret, or a signature changed on the way: a forgery, whatever node it names.
    const other = new NodeAuth(`${SECRET}-other`).signLink('node-a', 'node-b-before', host).value;
    expect(await upgrade(port, other)).toEqual({ status: 403, error: 'TUNNEL2_ERR_NODE_AUTH_INVALID' });
    const changed = `${stale.slice(0, -1)}${stale.endsWith('0') ? '1' : '0'}`;
    expect((await upgrade(port, changed)).status).toBe(403);
    expect(forged()).toBe(2);
    // Nothing was remembered for the misdirected ones: the one nonce this endpoint keeps is still free.
    const valid = new NodeAuth(SECRET).signLink('node-a', 'node-b', host).value;
    expect(await upgrade(port, valid)).toEqual({ status: 101 });
  });

  it('remembers nothing for a signature that does not verify: no one without the secret fills the set', async () => {
    const { port, forged } = await linkEndpoint(1);
    const other = new NodeAuth(`${SECRET}-other`).signLink('node-a', 'node-b', `127.0.0.1:${port}`).value;
    for (let i = 0; i < 3; i++) expect((await upgrade(port, other)).status).toBe(403);
    expect(forged()).toBe(3);
    const valid = new NodeAuth(SECRET).signLink('node-a', 'node-b', `127.0.0.1:${port}`).value;
    expect(await upgrade(port, valid)).toEqual({ status: 101 });
  });
});
