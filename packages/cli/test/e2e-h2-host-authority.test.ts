import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { h2c, h2Request } from './support/h2-client.js';
import { silent } from './support/stack.js';

// RFC 9113 §8.3.1: an HTTP/2 request whose `host` names another authority than its `:authority` is
// malformed. A hostile client sends both (node:http2 lets it): were the edge to route by one while a proxy
// in front (or the backend) reads the other, the client would choose which tunnel's checks apply. The
// edge answers 400 naming the mismatch and routes by `:authority`; a request with `host` alone (RFC 9113
// allows it) is routed by `host`.

let backend: Server;
let edge: Edge;
let port: number;
const tunnels: Tunnel[] = [];
/** The X-Forwarded-Host of the requests the backend saw (the agent gives the backend its own Host). */
const seen: string[] = [];

beforeAll(async () => {
  backend = createServer((req, res) => {
    const host = String(req.headers['x-forwarded-host']);
    seen.push(host);
    res.end(`backend saw ${host}`);
  });
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  const target = (backend.address() as AddressInfo).port;
  edge = buildEdge({ port: 0, logger: silent });
  ({ port } = await edge.listen());
  tunnels.push(await connect({ target, server: edge.url, subdomain: 'open' }));
  tunnels.push(await connect({ target, server: edge.url, subdomain: 'locked', basicAuth: 'ann:s3cret' }));
});

afterAll(async () => {
  for (const tunnel of tunnels) await tunnel.close(0);
  await edge.close(0);
  await new Promise((resolve) => backend.close(resolve));
});

describe('host and :authority on the HTTP/2 side', () => {
  it('answers 400 naming both when host names another authority than :authority; nothing reaches a backend', async () => {
    const session = h2c(port);
    const before = seen.length;
    const answer = await h2Request(session, {
      ':path': '/',
      ':authority': `open.localhost:${port}`,
      host: `locked.localhost:${port}`,
    });
    session.close();
    expect(answer.status).toBe(400);
    expect(answer.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BAD_REQUEST');
    const body = answer.body.toString();
    expect(body).toContain(`locked.localhost:${port}`);
    expect(body).toContain(`open.localhost:${port}`);
    expect(body).toContain('RFC 9113');
    expect(seen.length).toBe(before);
  });

  it('answers a gRPC call with the mismatch in the gRPC form', async () => {
    const session = h2c(port);
    const answer = await h2Request(session, {
      ':method': 'POST',
      ':path': '/pkg.Service/Call',
      ':authority': `open.localhost:${port}`,
      host: `locked.localhost:${port}`,
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    session.close();
    expect(answer.status).toBe(200);
    expect(answer.headers['grpc-status']).not.toBe('0');
    expect(answer.headers['grpc-status']).toBeDefined();
    expect(decodeURIComponent(String(answer.headers['grpc-message']))).toContain('another authority');
  });

  it('routes by :authority when host agrees with it but for case', async () => {
    const session = h2c(port);
    const answer = await h2Request(session, {
      ':path': '/',
      ':authority': `open.localhost:${port}`,
      host: `OPEN.localhost:${port}`,
    });
    session.close();
    expect(answer.status).toBe(200);
    expect(answer.body.toString().toLowerCase()).toBe(`backend saw open.localhost:${port}`);
  });

  it("routes by :authority when host names it with the scheme's default port (an equivalent, as Envoy)", async () => {
    const session = h2c(port);
    // A proxy in front that writes `host` with the port spelled out while :authority leaves it implied.
    const answer = await h2Request(session, {
      ':path': '/',
      ':scheme': 'http',
      ':authority': 'open.localhost',
      host: 'OPEN.localhost:80',
    });
    const reverse = await h2Request(session, {
      ':path': '/',
      ':scheme': 'http',
      ':authority': 'open.localhost:80',
      host: 'open.localhost',
    });
    // An IPv6 literal: `[::1]:80` and `[::1]` are one authority (the edge's own landing page, not a 400).
    const literal = await h2Request(session, {
      ':path': '/',
      ':scheme': 'http',
      ':authority': '[::1]',
      host: '[::1]:80',
    });
    // https's default port is not http's: still a conflict.
    const otherPort = await h2Request(session, {
      ':path': '/',
      ':scheme': 'http',
      ':authority': 'open.localhost',
      host: 'open.localhost:443',
    });
    session.close();
    expect(answer.status).toBe(200);
    expect(reverse.status).toBe(200);
    expect(literal.status).toBe(200);
    expect(otherPort.status).toBe(400);
  });

  it('routes a request with host and no :authority by host', async () => {
    const session = h2c(port);
    // node:http2 sends no :authority of its own when the request names its host.
    const answer = await h2Request(session, { ':path': '/', host: `open.localhost:${port}` });
    session.close();
    expect(answer.status).toBe(200);
    expect(answer.body.toString()).toBe(`backend saw open.localhost:${port}`);
  });
});
