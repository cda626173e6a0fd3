import { randomBytes } from 'node:crypto';
import type { ClientHttp2Session } from 'node:http2';
import { constants as h2 } from 'node:http2';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { type H2TestBackend, startH2Backend } from './support/h2-backend.js';
import { h2c, h2Request } from './support/h2-client.js';
import { sha256 } from './support/http-client.js';
import { silent } from './support/stack.js';

// HTTP/2 end to end: an h2c client (prior knowledge) to the edge's plain port, the agent with --h2c, an h2c
// backend. What an HTTP/2 client sends (trailers, resets) reaches the backend, and back.

let backend: H2TestBackend;
let edge: Edge;
let tunnel: Tunnel;
let client: ClientHttp2Session;
let port: number;

beforeAll(async () => {
  backend = await startH2Backend();
  edge = buildEdge({ port: 0, logger: silent });
  ({ port } = await edge.listen());
  tunnel = await connect({ target: backend.port, server: edge.url, subdomain: 'e2e', h2c: true });
  client = h2c(port);
});
afterAll(async () => {
  client.close();
  await tunnel.close(0);
  await edge.close(0);
  await backend.close();
});

const at = (path: string, method = 'GET') => ({
  ':method': method,
  ':path': path,
  ':authority': `e2e.localhost:${port}`,
});

describe('HTTP/2 client → edge → agent → HTTP/2 backend', () => {
  it('a streamed POST with request trailers: the backend gets the body, then the trailers', async () => {
    const got = new Promise<{ sha: string; trailers: Record<string, unknown> }>((resolve) => {
      backend.routes.set('/up', (stream) => {
        const chunks: Buffer[] = [];
        let trailers: Record<string, unknown> = {};
        stream.on('data', (chunk: Buffer) => chunks.push(chunk));
        stream.on('trailers', (t) => {
          trailers = t;
        });
        stream.on('end', () => {
          stream.respond({ ':status': 200 });
          stream.end('ok');
          resolve({ sha: sha256(Buffer.concat(chunks)), trailers });
        });
      });
    });
    const parts = [randomBytes(300_000), randomBytes(300_000)];
    const answer = await h2Request(client, at('/up', 'POST'), {
      body: parts,
      trailers: { 'x-checksum': 'abc', 'grpc-status-details-bin': 'AAE=' },
    });
    expect(answer.status).toBe(200);
    const { sha, trailers } = await got;
    expect(sha).toBe(sha256(Buffer.concat(parts)));
    expect(trailers).toMatchObject({ 'x-checksum': 'abc', 'grpc-status-details-bin': 'AAE=' });
  });

  it("the backend's trailers reach the client as HTTP/2 trailers", async () => {
    backend.routes.set('/t', (stream) => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'x-trace-bin': 'AQI=' }));
      stream.end(Buffer.from([0, 0, 0, 0, 0]));
    });
    const answer = await h2Request(client, at('/t', 'POST'), { body: [Buffer.from([0, 0, 0, 0, 0])] });
    expect(answer.status).toBe(200);
    expect(answer.trailers).toMatchObject({ 'grpc-status': '0', 'x-trace-bin': 'AQI=' });
  });

  it('a trailers-only answer reaches the client as one HEADERS with END_STREAM', async () => {
    backend.routes.set('/only', (stream) => {
      stream.respond(
        { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '7', 'grpc-message': 'denied' },
        { endStream: true },
      );
    });
    const answer = await h2Request(client, at('/only', 'POST'), { body: [Buffer.from([0, 0, 0, 0, 0])] });
    expect(answer.headers['grpc-status']).toBe('7');
    expect(answer.trailers).toBeUndefined();
    expect(answer.body.length).toBe(0);
  });

  it("the client's RST_STREAM reaches the backend as CANCEL", async () => {
    const closed = new Promise<number>((resolve) => {
      backend.routes.set('/hold', (stream) => {
        stream.respond({ ':status': 200 });
        stream.write('first');
        stream.on('close', () => resolve(stream.rstCode ?? -1));
      });
    });
    const stream = client.request(at('/hold'), { endStream: true });
    stream.on('error', () => {});
    await new Promise((resolve) => stream.once('data', resolve));
    stream.close(h2.NGHTTP2_CANCEL);
    expect(await closed).toBe(h2.NGHTTP2_CANCEL);
  });

  it("the backend's RST_STREAM after the head reaches the client as a reset", async () => {
    backend.routes.set('/rst', (stream) => {
      stream.respond({ ':status': 200 }, { waitForTrailers: true });
      stream.write('x', () => stream.close(h2.NGHTTP2_REFUSED_STREAM));
    });
    const answer = await h2Request(client, at('/rst'));
    expect(answer.status).toBe(200);
    // Which code the client sees is the edge's mapping (PROTOCOL.md §13); the agent's half, REFUSED_STREAM
    // for REFUSED_STREAM, is proven frame by frame in e2e-h2-frames.test.ts.
    expect(answer.rstCode).toBeDefined();
    expect(answer.trailers).toBeUndefined();
  });
});
