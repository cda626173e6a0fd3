import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { createServer, type Socket } from 'node:net';
import {
  ErrorCode,
  encodeHello,
  type MuxStream,
  PROTOCOL_VERSION,
  resolveSettings,
  WindowBudget,
} from '@tunnel2/protocol';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { type WebSocket, WebSocketServer } from 'ws';
import { buildEdge } from '../src/build-edge.js';
import { LINK_TENANT_STREAMS, type LinkTenant } from '../src/cluster/link/link-shares.js';
import { type LinkOpening, NodeLinks } from '../src/cluster/link/node-link.js';
import { NodeAuth } from '../src/cluster/node-auth.js';
import type { HopCounters } from '../src/cluster/node-hop.js';

const SECRET = 'a-cluster-secret-of-at-least-32-characters';
const TENANT = { session: 'shop', account: undefined, client: '127.0.0.1' };
const silent = pino({ level: 'silent' });

/** Node A's links, with a connect timeout far beyond the tests: only close() ends a wait. */
function nodeLinks(counters: HopCounters = { bytesIn: 0, bytesOut: 0 }): NodeLinks {
  return new NodeLinks({
    nodeId: 'node-a',
    auth: new NodeAuth(SECRET),
    protocol: {},
    maxMessageSize: 4 * 1024 * 1024,
    windowBudget: new WindowBudget(1024 * 1024),
    connectTimeoutMs: 60_000,
    counters,
    logger: silent,
  });
}

describe('NodeLinks', () => {
  it('cuts a link still opening when closed, and answers the requests waiting for it', async () => {
    // A peer that accepts the connection and never answers the upgrade: the link stays "opening".
    const accepted: Socket[] = [];
    const peer = createServer((socket) => {
      accepted.push(socket);
      socket.resume();
    });
    peer.listen(0, '127.0.0.1');
    await once(peer, 'listening');
    const { port } = peer.address() as { port: number };
    const links = nodeLinks();
    try {
      const opening = new Promise<LinkOpening>((resolve) =>
        links.open({ nodeId: 'node-b', url: `http://127.0.0.1:${port}/` }, TENANT, resolve),
      );
      const [socket] = (await once(peer, 'connection')) as [Socket];
      const gone = once(socket, 'close');
      links.close();
      expect(await opening).toMatchObject({ failed: 'unreachable' });
      await gone;
    } finally {
      for (const socket of accepted) socket.destroy();
      peer.close();
    }
  });

  it('opens no new link once closed: a request then hears this node stops, and no socket is made', async () => {
    const accepted: Socket[] = [];
    const peer = createServer((socket) => accepted.push(socket));
    peer.listen(0, '127.0.0.1');
    await once(peer, 'listening');
    const { port } = peer.address() as { port: number };
    const links = nodeLinks();
    try {
      links.close();
      const opening = await new Promise<LinkOpening>((resolve) =>
        links.open({ nodeId: 'node-b', url: `http://127.0.0.1:${port}/` }, TENANT, resolve),
      );
      // Not the peer's fault: nothing blames it (the unreachable count, its cache entries).
      expect(opening).toEqual({ failed: 'stopping' });
      // Long enough for a connect on loopback to have been accepted.
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(accepted).toHaveLength(0);
      expect(links.size).toBe(0);
    } finally {
      for (const socket of accepted) socket.destroy();
      peer.close();
    }
  });

  it('refuses a text message from the peer and keeps its byte count a number', async () => {
    // A node URL that reaches some other WebSocket service: it upgrades, then speaks text.
    const peer = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await once(peer, 'listening');
    peer.on('connection', (ws) => ws.send('hello, I am not a tunnel2 node'));
    const { port } = peer.address() as { port: number };
    const counters: HopCounters = { bytesIn: 0, bytesOut: 0 };
    const links = nodeLinks(counters);
    try {
      const opening = await new Promise<LinkOpening>((resolve) =>
        links.open({ nodeId: 'node-b', url: `http://127.0.0.1:${port}/` }, TENANT, resolve),
      );
      expect(opening).toMatchObject({ failed: 'unreachable' });
      expect(counters.bytesIn).toBe(0);
    } finally {
      links.close();
      for (const client of peer.clients) client.terminate();
      peer.close();
    }
  });

  /**
   * A listener that upgrades any link and answers with a HELLO carrying `proof` (what a node URL that was
   * led elsewhere, say by a forged record, would find); resolves what the link came to and the headers seen.
   */
  async function linkToImpostor(
    proof: (nonce: string) => unknown,
    versions = { minVersion: PROTOCOL_VERSION, maxVersion: PROTOCOL_VERSION },
  ): Promise<{ opening: LinkOpening; links: NodeLinks }> {
    const peer = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await once(peer, 'listening');
    peer.on('connection', (ws: WebSocket, req: IncomingMessage) => {
      const nonce = String(req.headers['x-tunnel2-node-auth']).split(' ')[4] ?? '';
      const hello = {
        ...versions,
        settings: resolveSettings({}),
        meta: { node: 'node-b', linkProof: proof(nonce) },
      };
      ws.send(encodeHello(hello, false));
    });
    const { port } = peer.address() as { port: number };
    const links = nodeLinks();
    try {
      const opening = await new Promise<LinkOpening>((resolve) =>
        links.open({ nodeId: 'node-b', url: `http://127.0.0.1:${port}/` }, TENANT, resolve),
      );
      return { opening, links };
    } finally {
      links.close();
      for (const client of peer.clients) client.terminate();
      peer.close();
    }
  }

  it("takes a link only once the accepting node proved the secret for this link's nonce", async () => {
    const right = new NodeAuth(SECRET);
    expect(
      (await linkToImpostor((nonce) => right.proveLink('node-a', 'node-b', nonce))).opening,
    ).toMatchObject({
      stream: expect.anything(),
    });
    // No proof, a proof with another secret, one for another node, one for another nonce: no link.
    const other = new NodeAuth(`${SECRET}-other`);
    for (const proof of [
      () => undefined,
      (nonce: string) => other.proveLink('node-a', 'node-b', nonce),
      (nonce: string) => right.proveLink('node-a', 'node-c', nonce),
      () => right.proveLink('node-a', 'node-b', '0'.repeat(32)),
    ]) {
      expect((await linkToImpostor(proof)).opening).toMatchObject({ failed: 'unreachable' });
    }
  });

  it('falls back to the HTTP hop when the peer refuses the link signature (a node from before v2)', async () => {
    const peer = createServer((socket) => {
      socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
    });
    peer.listen(0, '127.0.0.1');
    await once(peer, 'listening');
    const { port } = peer.address() as { port: number };
    const url = `http://127.0.0.1:${port}/`;
    const links = nodeLinks();
    try {
      const opening = await new Promise<LinkOpening>((resolve) =>
        links.open({ nodeId: 'node-b', url }, TENANT, resolve),
      );
      expect(opening).toEqual({ failed: 'refused' });
      expect(links.viaHop(url)).toBe(true);
    } finally {
      links.close();
      peer.close();
    }
  });

  it('takes 421 for a node id gone from the address as "ask again", not as a refusal: no HTTP hop, no forgery', async () => {
    // Node B restarted at the same address with a new id: requests that still name its old id (owner cache,
    // its node record until its TTL) open a link signed for that id, which B refuses 421.
    const peer = buildEdge({
      port: 0,
      host: '127.0.0.1',
      logger: silent,
      nodeId: 'node-b2',
      cluster: { secret: SECRET },
    });
    await peer.listen();
    let upgrades = 0;
    peer.app.server.on('upgrade', () => upgrades++);
    const links = nodeLinks();
    const open = (nodeId: string): Promise<LinkOpening> =>
      new Promise((resolve) => links.open({ nodeId, url: peer.url }, TENANT, resolve));
    try {
      // Both at once, the stale id first: neither closes the other's link.
      const [stale, live] = await Promise.all([open('node-b1'), open('node-b2')]);
      expect(stale).toEqual({ failed: 'misdirected' });
      expect(live).toHaveProperty('stream');
      expect(links.viaHop(peer.url)).toBe(false);
      expect(peer.cluster?.counters.forged).toBe(0);
      expect(links.size).toBe(1);
      // Requests alternating between the ids: the live link stays, only the stale id's upgrades are made.
      for (let i = 0; i < 3; i++) {
        expect(await open('node-b1')).toEqual({ failed: 'misdirected' });
        expect(await open('node-b2')).toHaveProperty('stream');
      }
      expect(upgrades).toBe(5);
      expect(peer.linkServer?.size).toBe(1);
      expect(links.viaHop(peer.url)).toBe(false);
      // The stale id's end did not take the live link out of the map: closing the links closes it.
      links.close();
      for (let i = 0; i < 1000 && peer.linkServer?.size !== 0; i++)
        await new Promise((resolve) => setTimeout(resolve, 5));
      expect(peer.linkServer?.size).toBe(0);
    } finally {
      links.close();
      await peer.close(0);
    }
  });

  it('forgets only the named node id at an address: the link to the node there now stays', async () => {
    const peer = buildEdge({
      port: 0,
      host: '127.0.0.1',
      logger: silent,
      nodeId: 'node-b2',
      cluster: { secret: SECRET },
    });
    await peer.listen();
    let upgrades = 0;
    peer.app.server.on('upgrade', () => upgrades++);
    const links = nodeLinks();
    const open = (nodeId: string): Promise<LinkOpening> =>
      new Promise((resolve) => links.open({ nodeId, url: peer.url }, TENANT, resolve));
    try {
      expect(await open('node-b2')).toHaveProperty('stream');
      links.forget(peer.url, 'node-b1');
      expect(await open('node-b2')).toHaveProperty('stream');
      expect(upgrades).toBe(1);
      links.forget(peer.url, 'node-b2');
      expect(links.size).toBe(0);
      expect(await open('node-b2')).toHaveProperty('stream');
      expect(upgrades).toBe(2);
    } finally {
      links.close();
      await peer.close(0);
    }
  });

  it('takes no link from a peer that proves the secret but speaks no protocol version this node does', async () => {
    const auth = new NodeAuth(SECRET);
    const { opening } = await linkToImpostor((nonce) => auth.proveLink('node-a', 'node-b', nonce), {
      minVersion: PROTOCOL_VERSION + 1,
      maxVersion: PROTOCOL_VERSION + 2,
    });
    expect(opening).toMatchObject({ failed: 'unreachable' });
  });

  it('refuses a tenant its share of a live link: a quarter of its streams per session, owner or client', async () => {
    // A real peer node; the streams are opened here and never sent, so only this side's accounting runs.
    const peer = buildEdge({
      port: 0,
      host: '127.0.0.1',
      logger: silent,
      nodeId: 'node-b',
      cluster: { secret: SECRET },
    });
    await peer.listen();
    const links = nodeLinks();
    const open = (tenant: LinkTenant): Promise<LinkOpening> =>
      new Promise((resolve) => links.open({ nodeId: 'node-b', url: peer.url }, tenant, resolve));
    try {
      const hog = { session: 'hog', account: 'owner-a', client: '10.0.0.1' };
      const streams: MuxStream[] = [];
      for (let i = 0; i < LINK_TENANT_STREAMS; i++) {
        const opening = await open(hog);
        if (!('stream' in opening)) throw new Error(`stream ${i}: ${JSON.stringify(opening)}`);
        streams.push(opening.stream);
      }
      expect(await open(hog)).toEqual({ failed: 'share' });
      // The same client for another tunnel, the same account's other tunnel: refused too.
      expect(await open({ ...hog, session: 'other', account: 'owner-b' })).toEqual({ failed: 'share' });
      expect(await open({ ...hog, session: 'other', client: '10.0.0.2' })).toEqual({ failed: 'share' });
      // Anyone else is served.
      expect(await open({ session: 'victim', account: 'owner-v', client: '10.0.0.9' })).toHaveProperty(
        'stream',
      );
      // One of the hog's streams ends: it may open one again.
      streams[0]?.reset(ErrorCode.CANCEL);
      expect(await open(hog)).toHaveProperty('stream');
    } finally {
      links.close();
      await peer.close(0);
    }
  });
});
