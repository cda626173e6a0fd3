import { createServer as createBackend, type Server } from 'node:http';
import { connect as h2connect } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { createServer as createTlsServer, type TLSSocket, type Server as TlsServer } from 'node:tls';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { makeCertificates, type TestCertificates } from './support/https-backend.js';
import { silent } from './support/stack.js';

// The seam a TLS listener uses: a socket whose ALPN chose h2 is handed to `edge.serveHttp2` and served
// exactly as h2c is, and the backend is told the client came over https.

let certs: TestCertificates;
let backend: Server;
let edge: Edge;
let tunnel: Tunnel;
let tls: TlsServer;
let tlsPort: number;

beforeAll(async () => {
  certs = await makeCertificates();
  backend = createBackend((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(
      JSON.stringify({ proto: req.headers['x-forwarded-proto'], host: req.headers['x-forwarded-host'] }),
    );
  });
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  edge = buildEdge({ port: 0, logger: silent });
  await edge.listen();
  tunnel = await connect({
    target: (backend.address() as AddressInfo).port,
    server: edge.url,
    subdomain: 'secure',
  });
  tls = createTlsServer({ ...certs.signed, ALPNProtocols: ['h2'] }, (socket: TLSSocket) => {
    expect(socket.alpnProtocol).toBe('h2');
    edge.serveHttp2(socket);
  });
  await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
  tlsPort = (tls.address() as AddressInfo).port;
});

afterAll(async () => {
  await tunnel.close(0);
  await edge.close(0);
  await new Promise((resolve) => tls.close(resolve));
  await new Promise((resolve) => backend.close(resolve));
  await certs.dispose();
});

it('an ALPN h2 socket handed to serveHttp2 is served; X-Forwarded-Proto says https', async () => {
  const session = h2connect(`https://localhost:${tlsPort}`, { ca: certs.ca.cert });
  session.on('error', () => {});
  const stream = session.request({ ':path': '/', ':authority': `secure.localhost:${tlsPort}` });
  const status = await new Promise<number>((resolve) =>
    stream.once('response', (headers) => resolve(Number(headers[':status']))),
  );
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  await new Promise((resolve) => stream.once('end', resolve));
  session.close();
  expect(status).toBe(200);
  expect(JSON.parse(Buffer.concat(chunks).toString())).toEqual({
    proto: 'https',
    host: `secure.localhost:${tlsPort}`,
  });
});
