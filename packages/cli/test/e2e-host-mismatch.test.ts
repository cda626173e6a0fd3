import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { rawExchange } from './support/raw-client.js';
import { silent } from './support/stack.js';

// Absolute-form targets and a Host that disagrees with them (RFC 9112 §3.2.2: the absolute-form authority
// wins and Host is ignored). Whatever the request names, it reaches the configured target of the tunnel it
// was routed to, or nothing: the edge never connects anywhere on a request's say-so.

interface Recorder {
  server: Server;
  port: number;
  seen: { url: string; host: string }[];
}

async function recorder(name: string): Promise<Recorder> {
  const seen: Recorder['seen'] = [];
  const server = createServer((req, res) => {
    seen.push({ url: req.url ?? '', host: req.headers.host ?? '' });
    res.end(`answered by ${name}`);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as AddressInfo).port, seen };
}

let edge: Edge;
let port: number;
let alpha: Recorder;
let beta: Recorder;
const tunnels: Tunnel[] = [];

beforeAll(async () => {
  [alpha, beta] = await Promise.all([recorder('alpha'), recorder('beta')]);
  edge = buildEdge({ port: 0, logger: silent });
  ({ port } = await edge.listen());
  for (const [name, backend] of [
    ['alpha', alpha],
    ['beta', beta],
  ] as const) {
    tunnels.push(await connect({ target: backend.port, server: edge.url, subdomain: name }));
  }
});
afterAll(async () => {
  for (const tunnel of tunnels) await tunnel.close(0);
  await edge.close(0);
  for (const { server } of [alpha, beta]) {
    server.closeAllConnections();
    server.close();
  }
});
beforeEach(() => {
  alpha.seen.length = 0;
  beta.seen.length = 0;
});

const get = (target: string, host: string) =>
  rawExchange(port, `GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);

describe('mismatched Host and absolute-form targets', () => {
  it('an absolute-form target naming one tunnel wins over a Host naming another', async () => {
    const text = await get(`http://beta.localhost:${port}/x?y=1`, `alpha.localhost:${port}`);
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
    expect(text).toMatch(/answered by beta$/);
    expect(alpha.seen).toEqual([]);
    // Only the path travels on, and the backend sees its own Host (rewrite mode), not a public name.
    expect(beta.seen).toEqual([{ url: '/x?y=1', host: `localhost:${beta.port}` }]);
  });

  it('an absolute-form path route reaches that tunnel whatever Host says', async () => {
    const text = await get(`http://localhost:${port}/session/alpha/p`, `beta.localhost:${port}`);
    expect(text).toMatch(/answered by alpha$/);
    expect(alpha.seen.map((r) => r.url)).toEqual(['/p']);
    expect(beta.seen).toEqual([]);
  });

  it("an absolute-form target naming a backend's real address is not proxied there", async () => {
    for (const target of [`http://127.0.0.1:${beta.port}/x`, `http://localhost:${alpha.port}/x`]) {
      const text = await get(target, `alpha.localhost:${port}`);
      expect(text).toMatch(/^HTTP\/1\.1 404 /);
    }
    expect(alpha.seen).toEqual([]);
    expect(beta.seen).toEqual([]);
  });

  it('a Host that names no tunnel reaches no backend', async () => {
    const unknown = await get('/x', `nobody.localhost:${port}`);
    expect(unknown).toMatch(/^HTTP\/1\.1 404 /);
    expect(unknown).toMatch(/x-tunnel2-error: TUNNEL2_ERR_UNKNOWN_SESSION/i);
    const foreign = await get('/x', 'evil.example');
    expect(foreign).toMatch(/^HTTP\/1\.1 404 /);
    expect(alpha.seen).toEqual([]);
    expect(beta.seen).toEqual([]);
  });

  it('a target in neither form (authority-form, asterisk-form) reaches no backend', async () => {
    const authority = await get(`beta.localhost:${port}`, `beta.localhost:${port}`);
    expect(authority).toMatch(/^HTTP\/1\.1 400 /);
    const asterisk = await rawExchange(
      port,
      `OPTIONS * HTTP/1.1\r\nHost: beta.localhost:${port}\r\nConnection: close\r\n\r\n`,
    );
    expect(asterisk).toMatch(/^HTTP\/1\.1 404 /);
    expect(alpha.seen).toEqual([]);
    expect(beta.seen).toEqual([]);
  });
});
