import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { type AddressInfo, connect as netConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CertificateStore } from '../src/listeners/certificate-store.js';
import { createPublicListener, type PublicListenerOptions } from '../src/listeners/public-listener.js';

// The seam the HTTP/2 side plugs into: which server gets a connection, by ALPN on a TLS port, by
// `choosePlain` on a plain one. Real sockets; a self-signed certificate made with openssl.

const silent = pino({ level: 'silent' });
let dir: string;
let store: CertificateStore;
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tunnel2-listener-'));
  await promisify(execFile)('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    join(dir, 'k.pem'),
    '-out',
    join(dir, 'c.pem'),
    '-days',
    '1',
    '-subj',
    '/CN=localhost',
    '-addext',
    'subjectAltName=DNS:localhost',
  ]);
  store = new CertificateStore({
    pairs: [{ cert: join(dir, 'c.pem'), key: join(dir, 'k.pem') }],
    logger: silent,
  });
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** An HTTP/1.1 server answering `h1`, and an "HTTP/2 handler" that writes `h2` and closes. */
function servers(): { http1: Server; http2: (socket: Duplex) => void } {
  const http1 = createServer((_req, res) => res.end('h1'));
  cleanups.push(() => http1.closeAllConnections());
  return { http1, http2: (socket) => socket.end('h2') };
}

async function listening(
  options: PublicListenerOptions,
): Promise<{ port: number; server: Server | unknown }> {
  const listener = createPublicListener(options);
  await new Promise<void>((resolve) => listener.server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => {
    listener.destroyAll();
    listener.server.close();
  });
  return { port: (listener.server.address() as AddressInfo).port, server: listener.server };
}

async function readAll(socket: Duplex): Promise<string> {
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  await once(socket, 'end');
  return Buffer.concat(chunks).toString();
}

describe('createPublicListener', () => {
  it('on a TLS port, hands a connection to the HTTP/2 handler when ALPN chose h2, else to the HTTP/1.1 server', async () => {
    const { http1, http2 } = servers();
    const { port } = await listening({
      http1,
      http2,
      admit: () => true,
      logger: silent,
      tls: { certificates: store, handshakeTimeoutMs: 5_000 },
    });
    const h2 = tlsConnect({
      host: '127.0.0.1',
      port,
      servername: 'localhost',
      rejectUnauthorized: false,
      ALPNProtocols: ['h2', 'http/1.1'],
    });
    await once(h2, 'secureConnect');
    expect(h2.alpnProtocol).toBe('h2');
    expect(await readAll(h2)).toBe('h2');
    const h1 = tlsConnect({ host: '127.0.0.1', port, servername: 'localhost', rejectUnauthorized: false });
    await once(h1, 'secureConnect');
    expect(h1.alpnProtocol).toBe(false);
    h1.end('GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
    const answer = await readAll(h1);
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK/);
    expect(answer.endsWith('\r\n\r\nh1')).toBe(true);
  });

  it('offers only http/1.1 by ALPN without an HTTP/2 handler', async () => {
    const { http1 } = servers();
    const { port } = await listening({
      http1,
      admit: () => true,
      logger: silent,
      tls: { certificates: store, handshakeTimeoutMs: 5_000 },
    });
    const client = tlsConnect({
      host: '127.0.0.1',
      port,
      servername: 'localhost',
      rejectUnauthorized: false,
      ALPNProtocols: ['h2', 'http/1.1'],
    });
    await once(client, 'secureConnect');
    expect(client.alpnProtocol).toBe('http/1.1');
    client.destroy();
  });

  it('on a plain port, lets choosePlain pick the server; without it the HTTP/1.1 server listens itself', async () => {
    const { http1, http2 } = servers();
    const chosen: string[] = [];
    const { port } = await listening({
      http1,
      http2,
      admit: () => true,
      logger: silent,
      // A stand-in for the preface sniffing: the first byte says which.
      choosePlain: (socket, take) =>
        socket.once('readable', () => {
          const first = socket.read(1) as Buffer;
          socket.unshift(first);
          const protocol = first.toString() === 'P' ? 'h2' : 'http/1.1';
          chosen.push(protocol);
          take(protocol, socket);
        }),
    });
    const prior = netConnect(port, '127.0.0.1');
    prior.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
    expect(await readAll(prior)).toBe('h2');
    const plain = netConnect(port, '127.0.0.1');
    plain.end('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(await readAll(plain)).toContain('h1');
    expect(chosen).toEqual(['h2', 'http/1.1']);

    const direct = servers();
    const alone = createPublicListener({ http1: direct.http1, admit: () => true, logger: silent });
    expect(alone.server).toBe(direct.http1);
  });

  it('closes a connection admit refuses before any handshake', async () => {
    const { http1 } = servers();
    const seen: Socket[] = [];
    const { port } = await listening({
      http1,
      admit: (socket) => {
        seen.push(socket);
        return false;
      },
      logger: silent,
      tls: { certificates: store, handshakeTimeoutMs: 5_000 },
    });
    const client = netConnect(port, '127.0.0.1');
    await once(client, 'close');
    expect(seen).toHaveLength(1);
  });
});
