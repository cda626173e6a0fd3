import { once } from 'node:events';
import { createServer, request, type Server, type ServerResponse } from 'node:http';
import { connect as connectTcp, type Socket } from 'node:net';
import type { Edge } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { send } from './support/http-client.js';
import { until } from './support/stack.js';
import { twoNodes } from './support/two-nodes.js';

type Backend = Awaited<ReturnType<typeof createTestBackend>>;

/** Tunnels serving the endless downloads, and the downloads of each that are never read. */
const HOGS = 7;
const DOWNLOADS_PER_HOG = 80;
/** An answer that needs body credit on the link (a head alone is free of flow control). */
const VICTIM_PATH = '/bytes/4096';
const VICTIM_ANSWERS = 20;

/** Waits until `read()` gives the same value `times` polls in a row (bounded in rounds); returns it. */
async function settled(read: () => number, times = 5): Promise<number> {
  let last = read();
  let same = 0;
  for (let round = 0; round < 400 && same < times; round++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const now = read();
    same = now === last ? same + 1 : 0;
    last = now;
  }
  return last;
}

/** A download of an endless body through the node at `port`, by a client that never reads a byte of it. */
async function unreadDownload(port: number, host: string): Promise<Socket> {
  const socket = connectTcp(port, '127.0.0.1');
  socket.on('error', () => {});
  await once(socket, 'connect');
  socket.pause();
  socket.write(`GET /bytes/${2 ** 40} HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
  return socket;
}

/**
 * Sequential victim requests through `port` until `count` are answered or `deadlineMs` passes; the answers
 * and how long they took. A request still open at the deadline is given up (and not counted).
 */
async function victimRound(
  port: number,
  count: number,
  deadlineMs: number,
): Promise<{ answered: number; elapsedMs: number }> {
  const start = performance.now();
  let answered = 0;
  while (answered < count) {
    const left = deadlineMs - (performance.now() - start);
    if (left <= 0) break;
    try {
      const answer = await send({
        port,
        path: VICTIM_PATH,
        headers: ['Host', 'victim.localhost'],
        timeoutMs: Math.ceil(left),
      });
      expect(answer.status).toBe(200);
      expect(answer.length).toBe(4096);
      answered++;
    } catch {
      break;
    }
  }
  return { answered, elapsedMs: performance.now() - start };
}

/**
 * Issue #29: every tenant between two nodes shares one link. Downloads through node A of endless bodies
 * from several tunnels on node B, by clients that never read, must hold only their own streams' windows:
 * a victim tunnel on B reached through A keeps being answered, at about its own pace. (The hogs are
 * anonymous agents of one address, so one account; the victim's agent has a token: an account of its own.)
 */
describe('a link shared by tenants, one of whom never reads', () => {
  let a: Edge;
  let b: Edge;
  let portA: number;
  let backend: Backend;
  const tunnels: Tunnel[] = [];
  const sockets: Socket[] = [];

  beforeAll(async () => {
    const token = 'the-victims-token';
    ({ a, b, portA } = await twoNodes({ b: { auth: { tokens: [token], allowAnonymous: true } } }));
    backend = await createTestBackend();
    for (let i = 0; i < HOGS; i++)
      tunnels.push(await connect({ target: backend.port, server: b.url, subdomain: `hog${i}` }));
    tunnels.push(await connect({ target: backend.port, server: b.url, subdomain: 'victim', token }));
  });

  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    for (const tunnel of tunnels) await tunnel.close(0);
    await b?.close(0);
    await a?.close(0);
    await backend?.close();
  });

  it('keeps answering a victim across nodes within a generous factor of its own baseline', async () => {
    // Baseline on the same link, before the attack (the first request opens the link).
    await victimRound(portA, 1, 10_000);
    const baseline = await victimRound(portA, VICTIM_ANSWERS, 30_000);
    expect(baseline.answered).toBe(VICTIM_ANSWERS);

    const counters = a.cluster!.hop.counters;
    for (let hog = 0; hog < HOGS; hog++) {
      const opened = Array.from({ length: DOWNLOADS_PER_HOG }, () =>
        unreadDownload(portA, `hog${hog}.localhost`),
      );
      sockets.push(...(await Promise.all(opened)));
    }
    // The attack has filled whatever it can: nothing crossed the link for a second. (The clients' kernels
    // still take a little now and then, as their zero-window probes come back, in one process with the
    // victim: the victim's deadline below allows for that.)
    const crossed = await settled(() => counters.bytesIn, 20);
    expect(crossed).toBeGreaterThan(HOGS * DOWNLOADS_PER_HOG * 16 * 1024);

    // Twenty times the baseline's time, and at least 10 s: generous on a noisy machine, where everything
    // (nodes, agents, backend, 560 clients) shares this process. Without per-stream bounds the link's
    // session window is full of unread bytes and the victim's body never comes: 0 answers, however long.
    const deadline = Math.max(10_000, 20 * baseline.elapsedMs);
    const attacked = await victimRound(portA, VICTIM_ANSWERS, deadline);
    expect(attacked.answered).toBe(VICTIM_ANSWERS);
  });
});

/** A backend that holds every request to /hold until `release()` (then answers them all), the rest at once. */
async function holdingBackend(): Promise<{
  server: Server;
  port: number;
  held: ServerResponse[];
  release(): void;
}> {
  const held: ServerResponse[] = [];
  let released = false;
  const server = createServer((req, res) => {
    req.resume();
    if (req.url === '/hold' && !released) held.push(res);
    else res.end('ok');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    server,
    port: (server.address() as { port: number }).port,
    held,
    release: () => {
      released = true;
      for (const res of held.splice(0)) res.end('released');
    },
  };
}

/** A GET through `port` from the local address `from`; its status and x-tunnel2-error. */
function getFrom(
  port: number,
  host: string,
  path: string,
  from: string,
): Promise<{ status: number; error: string }> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port,
      path,
      headers: { host },
      agent: false,
      localAddress: from,
    });
    req.on('error', reject);
    req.on('response', (res) => {
      res.resume();
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, error: String(res.headers['x-tunnel2-error'] ?? '') }),
      );
    });
    req.end();
  });
}

/**
 * One client address may hold a quarter of a link's streams (1,024 of 4,096), whichever tunnels it asks:
 * requests held by their backend, 520 for each of two tunnels from 127.0.0.1; the 16 beyond the share are
 * answered busy at the ingress, and so is that client for a third tunnel, while another client (127.0.0.2)
 * is served. Each tunnel's agent has its own token, so each is its own account (anonymous agents of one
 * address would share one account's quarter: see the next test).
 */
describe("a client's share of a link", () => {
  let a: Edge;
  let b: Edge;
  let portA: number;
  let backend: Awaited<ReturnType<typeof holdingBackend>>;
  const tunnels: Tunnel[] = [];

  beforeAll(async () => {
    const tokens = ['token-of-one', 'token-of-two', 'token-of-three'];
    ({ a, b, portA } = await twoNodes({ b: { auth: { tokens } } }));
    backend = await holdingBackend();
    for (const [i, name] of ['one', 'two', 'three'].entries())
      tunnels.push(await connect({ target: backend.port, server: b.url, subdomain: name, token: tokens[i] }));
  });

  afterAll(async () => {
    backend?.release();
    for (const tunnel of tunnels) await tunnel.close(0);
    await b?.close(0);
    await a?.close(0);
    backend?.server.close();
  });

  it('answers the client busy beyond 1,024 streams on the link, and serves another client meanwhile', async () => {
    // The link opens first (its HELLO), so that every request below meets a live link.
    expect((await getFrom(portA, 'one.localhost', '/now', '127.0.0.1')).status).toBe(200);
    const answers: Promise<{ status: number; error: string }>[] = [];
    for (let i = 0; i < 1040; i++)
      answers.push(getFrom(portA, i % 2 === 0 ? 'one.localhost' : 'two.localhost', '/hold', '127.0.0.1'));
    const refused: { status: number; error: string }[] = [];
    for (const answer of answers) void answer.then((got) => got.status === 503 && refused.push(got));
    // The 16 beyond the share are answered at once; the 1,024 others wait (at the agent or the backend).
    await until(() => refused.length >= 16, { what: '16 requests refused', timeoutMs: 30_000 });
    expect(refused.every((got) => got.error === 'TUNNEL2_ERR_TUNNEL_BUSY')).toBe(true);
    // The same client for a tunnel it has no request on: its share is full all the same.
    const again = await getFrom(portA, 'three.localhost', '/now', '127.0.0.1');
    expect(again).toEqual({ status: 503, error: 'TUNNEL2_ERR_TUNNEL_BUSY' });
    // Another client is served meanwhile.
    expect((await getFrom(portA, 'three.localhost', '/now', '127.0.0.2')).status).toBe(200);
    backend.release();
    const all = await Promise.all(answers);
    const statuses = all.map((got) => got.status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(1024);
    expect(statuses.filter((status) => status === 503)).toHaveLength(16);
  });
});

/**
 * Issue #29, the link share of an account: an anonymous agent picks a new agent key (so a new owner) on every
 * connection, so its share is counted by its address, as the registry records it with the session. Two
 * anonymous agents from 127.0.0.1, each asked from two client addresses, hold a quarter of the link between
 * them: 520 held requests each, 260 per client and tunnel, stay under every client's and tunnel's share, but
 * the 16 beyond the address's 1,024 are answered busy; an agent with a token (its own account) is served
 * meanwhile, from the same clients. (Before: each agent had its own share, and four of them took the link.)
 */
describe("an anonymous agents' address's share of a link", () => {
  const TOKEN = 'a-token-for-the-account-share-test';
  let a: Edge;
  let b: Edge;
  let portA: number;
  let backend: Awaited<ReturnType<typeof holdingBackend>>;
  const tunnels: Tunnel[] = [];

  beforeAll(async () => {
    ({ a, b, portA } = await twoNodes({ b: { auth: { tokens: [TOKEN], allowAnonymous: true } } }));
    backend = await holdingBackend();
    for (const name of ['anon1', 'anon2'])
      tunnels.push(await connect({ target: backend.port, server: b.url, subdomain: name }));
    tunnels.push(await connect({ target: backend.port, server: b.url, subdomain: 'paid', token: TOKEN }));
  });

  afterAll(async () => {
    backend?.release();
    for (const tunnel of tunnels) await tunnel.close(0);
    await b?.close(0);
    await a?.close(0);
    backend?.server.close();
  });

  it('counts both agents against one share: busy beyond 1,024 streams, while another account is served', async () => {
    // Node A learns each session's account from the registry: the address for both anonymous agents.
    const anon1 = await a.cluster!.owner('anon1');
    const anon2 = await a.cluster!.owner('anon2');
    const paid = await a.cluster!.owner('paid');
    expect(anon1?.account).toBe('addr:127.0.0.1');
    expect(anon2?.account).toBe('addr:127.0.0.1');
    expect(paid?.account).not.toBe('addr:127.0.0.1');
    // The link opens first (its HELLO), so that every request below meets a live link.
    expect((await getFrom(portA, 'paid.localhost', '/now', '127.0.0.9')).status).toBe(200);
    const clients = ['127.0.0.2', '127.0.0.3'];
    const answers: Promise<{ status: number; error: string }>[] = [];
    for (let i = 0; i < 1040; i++) {
      const host = i % 2 === 0 ? 'anon1.localhost' : 'anon2.localhost';
      answers.push(getFrom(portA, host, '/hold', clients[Math.floor(i / 2) % 2]!));
    }
    const refused: { status: number; error: string }[] = [];
    for (const answer of answers) void answer.then((got) => got.status === 503 && refused.push(got));
    await until(() => refused.length >= 16, { what: '16 requests refused', timeoutMs: 30_000 });
    expect(refused.every((got) => got.error === 'TUNNEL2_ERR_TUNNEL_BUSY')).toBe(true);
    // A fresh client of either anonymous tunnel: the address's share is full all the same.
    expect(await getFrom(portA, 'anon1.localhost', '/now', '127.0.0.4')).toEqual({
      status: 503,
      error: 'TUNNEL2_ERR_TUNNEL_BUSY',
    });
    // Another account's tunnel is served, from a client that holds requests on the anonymous ones.
    expect((await getFrom(portA, 'paid.localhost', '/now', '127.0.0.2')).status).toBe(200);
    backend.release();
    const statuses = (await Promise.all(answers)).map((got) => got.status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(1024);
    expect(statuses.filter((status) => status === 503)).toHaveLength(16);
  });
});
