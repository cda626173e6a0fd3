import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { Agent, request } from 'node:https';
import { connect as netConnect } from 'node:net';
import { join } from 'node:path';
import { type TLSSocket, connect as tlsConnect } from 'node:tls';
import { promisify } from 'node:util';
import { buildEdge, createEdgeMetrics, type Edge } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { findCommand, type IssuedCertificate, makeTestCa, type TestCa } from '@tunnel2/test-services';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { type ClientOptions } from 'ws';
import { send } from './support/http-client.js';
import { spawnCli } from './support/processes.js';
import { silent, until } from './support/stack.js';
import { servedCertificate, watchedLog } from './support/tls-edge.js';
import { startWsBackend } from './support/ws-backend.js';

const run = promisify(execFile);

let ca: TestCa;
let localhost: IssuedCertificate;
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  ca = await makeTestCa();
  // Node's clients accept no wildcard directly under a one-label name (*.localhost): the names one by one.
  localhost = await ca.issue('localhost', ['localhost', 'secure.localhost', 'nobody.localhost', '127.0.0.1']);
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
afterAll(async () => {
  await ca.dispose();
});

async function tlsEdge(options: Parameters<typeof buildEdge>[0]): Promise<{ edge: Edge; port: number }> {
  const edge = buildEdge({ port: 0, logger: silent, ...options });
  cleanups.push(() => edge.close(0));
  const { port } = await edge.listen();
  return { edge, port };
}

interface HttpsAnswer {
  status: number;
  headers: IncomingMessage['headers'];
  body: string;
  serial: string;
  reused: boolean;
}

/** A GET over https to 127.0.0.1:port for `host` (SNI and Host), trusting only the test CA. */
function httpsGet(
  port: number,
  host: string,
  path = '/',
  agent: Agent | false = false,
): Promise<HttpsAnswer> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port,
      path,
      servername: host,
      headers: { host: `${host}:${port}` },
      ca: ca.ca.cert,
      agent,
    });
    req.on('error', reject);
    req.on('response', (res) => {
      // Read now: once the answer ends, a kept-alive socket goes back to the agent's pool.
      const socket = res.socket as TLSSocket;
      const serial = socket.getPeerCertificate().serialNumber;
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString(),
          serial,
          reused: req.reusedSocket,
        });
      });
    });
    req.end();
  });
}

describe('TLS at the edge', () => {
  it('serves HTTPS on the public port: https:// URLs, wss:// for agents, ALPN h2 for a client offering it', async () => {
    const { edge, port } = await tlsEdge({
      tls: { pairs: [{ cert: localhost.certFile, key: localhost.keyFile }] },
    });
    expect(edge.url).toBe(`https://127.0.0.1:${port}`);
    expect(edge.urlsFor('demo').url).toBe(`https://demo.localhost:${port}/`);
    expect(edge.addresses().agentCommand).toBe(`tunnel2 http <port> --server https://localhost:${port}`);
    const landing = await httpsGet(port, 'localhost');
    expect(landing.status).toBe(200);
    // A client offering h2 first gets it: the edge serves HTTP/2 (merged with the HTTP/2 ingress).
    const offered = tlsConnect({
      host: '127.0.0.1',
      port,
      ca: ca.ca.cert,
      servername: 'localhost',
      ALPNProtocols: ['h2', 'http/1.1'],
    });
    offered.on('error', () => {});
    await once(offered, 'secureConnect');
    expect(offered.alpnProtocol).toBe('h2');
    offered.destroy();
    expect(landing.body).toContain(`https://<name>.localhost:${port}/`);
    const missing = await httpsGet(port, 'nobody.localhost', '/x');
    expect(missing.status).toBe(404);
    expect(missing.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_UNKNOWN_SESSION');
  });

  it('chooses the certificate by SNI: exact names before a wildcard one label deep, else the first pair', async () => {
    const apex = await ca.issue('apex', ['tunnel.test']);
    const wildcard = await ca.issue('wild', ['*.tunnel.test']);
    const special = await ca.issue('special', ['special.tunnel.test']);
    const { port } = await tlsEdge({
      domain: 'tunnel.test',
      tls: {
        pairs: [apex, wildcard, special].map((pair) => ({ cert: pair.certFile, key: pair.keyFile })),
      },
    });
    const cn = async (servername: string | undefined): Promise<string | undefined> =>
      (await servedCertificate(port, ca.ca.cert, servername)).subject.CN as string | undefined;
    expect(await cn('tunnel.test')).toBe('tunnel.test');
    expect(await cn('demo.tunnel.test')).toBe('*.tunnel.test');
    expect(await cn('DEMO.Tunnel.Test')).toBe('*.tunnel.test');
    expect(await cn('special.tunnel.test')).toBe('special.tunnel.test');
    // One label only: a.b.tunnel.test is not covered by *.tunnel.test.
    expect(await cn('a.b.tunnel.test')).toBe('tunnel.test');
    expect(await cn('elsewhere.example')).toBe('tunnel.test');
    expect(await cn(undefined)).toBe('tunnel.test');
  });

  it('warns at start when no certificate names the tunnel hosts (*.domain) or the domain itself', async () => {
    const apex = await ca.issue('only-apex', ['tunnel.test']);
    const wildcard = await ca.issue('only-wild', ['*.tunnel.test']);
    const apexOnly = watchedLog();
    await tlsEdge({
      logger: apexOnly.logger,
      domain: 'tunnel.test',
      tls: { pairs: [{ cert: apex.certFile, key: apex.keyFile }] },
    });
    const warning = await apexOnly.waitFor('no TLS certificate names');
    expect(warning.level).toBe(40);
    expect(String(warning.msg)).toContain('*.tunnel.test');
    expect(String(warning.msg)).not.toContain(' nor tunnel.test');
    const both = watchedLog();
    await tlsEdge({
      logger: both.logger,
      domain: 'tunnel.test',
      tls: { pairs: [apex, wildcard].map((pair) => ({ cert: pair.certFile, key: pair.keyFile })) },
    });
    const wildOnly = watchedLog();
    await tlsEdge({
      logger: wildOnly.logger,
      domain: 'tunnel.test',
      tls: { pairs: [{ cert: wildcard.certFile, key: wildcard.keyFile }] },
    });
    expect(String((await wildOnly.waitFor('no TLS certificate names')).msg)).toMatch(
      /^no TLS certificate names tunnel\.test:/,
    );
    expect(both.lines.filter((line) => String(line.msg).startsWith('no TLS certificate names'))).toEqual([]);
  });

  it('reloads a changed certificate: a kept-alive connection keeps working, a new one gets the new certificate', async () => {
    const dir = join(ca.dir, 'reload');
    await mkdir(dir);
    const first = await ca.issue('reload-1', ['localhost']);
    const cert = join(dir, 'edge.crt');
    const key = join(dir, 'edge.key');
    await copyFile(first.certFile, cert);
    await copyFile(first.keyFile, key);
    const log = watchedLog();
    const { edge, port } = await tlsEdge({ logger: log.logger, tls: { pairs: [{ cert, key }] } });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    cleanups.push(() => agent.destroy());
    const before = await httpsGet(port, 'localhost', '/', agent);
    expect(before.status).toBe(200);

    const second = await ca.issue('reload-2', ['localhost']);
    const mark = log.lines.length;
    // As certbot does: the key first, then the certificate; the pair is taken once both are written.
    await copyFile(second.keyFile, key);
    await copyFile(second.certFile, cert);
    const reloaded = await log.waitFor('TLS certificates reloaded', mark);
    expect(reloaded.reason).toBe('file changed');
    expect(edge.tls?.reloads.ok).toBeGreaterThanOrEqual(1);

    const kept = await httpsGet(port, 'localhost', '/', agent);
    expect(kept.reused).toBe(true);
    expect(kept.status).toBe(200);
    expect(kept.serial).toBe(before.serial);
    const fresh = await httpsGet(port, 'localhost', '/');
    expect(fresh.status).toBe(200);
    expect(fresh.serial).not.toBe(before.serial);
    expect((await servedCertificate(port, ca.ca.cert, undefined)).serialNumber).toBe(fresh.serial);
  });

  it('warns of a certificate that expires within 14 days and exports when each one served expires', async () => {
    const log = watchedLog();
    // The test CA's certificates are valid for two days.
    const { edge } = await tlsEdge({
      logger: log.logger,
      tls: { pairs: [{ cert: localhost.certFile, key: localhost.keyFile }] },
    });
    const notAfter = Math.floor(new X509Certificate(localhost.cert).validToDate.getTime() / 1000);
    const warning = await log.waitFor('TLS certificate expires within 14 days');
    expect(warning.level).toBe(40);
    expect(warning.file).toBe(localhost.certFile);
    expect(warning.notAfter).toBe(new Date(notAfter * 1000).toISOString());
    const metrics = createEdgeMetrics(edge, 'test');
    cleanups.push(() => metrics.close());
    const { body } = await metrics.render();
    expect(body).toContain(
      `tunnel2_edge_tls_certificate_not_after_seconds{cert="${localhost.certFile}"} ${notAfter}`,
    );
  });

  it('keeps the previous certificate when a reload finds a broken file, and says which file', async () => {
    const dir = join(ca.dir, 'broken');
    await mkdir(dir);
    const cert = join(dir, 'edge.crt');
    const key = join(dir, 'edge.key');
    await copyFile(localhost.certFile, cert);
    await copyFile(localhost.keyFile, key);
    const log = watchedLog();
    const { edge, port } = await tlsEdge({ logger: log.logger, tls: { pairs: [{ cert, key }] } });
    const served = (await servedCertificate(port, ca.ca.cert, 'localhost')).serialNumber;
    const other = await ca.issue('other', ['localhost']);
    const mark = log.lines.length;
    // A key that is not the certificate's: the pair is refused whole.
    await copyFile(other.keyFile, key);
    // The whole line: a reload that caught the copy half-way would say something else first.
    const warning = await log.waitFor(
      `TLS certificate not reloaded, the previous one is kept: invalid setting tlsKey=${key}: is not the key`,
      mark,
    );
    expect(warning.level).toBe(40);
    expect(warning.file).toBe(key);
    expect(String(warning.msg)).toContain(
      `invalid setting tlsKey=${key}: is not the key of the certificate ${cert}`,
    );
    expect(edge.tls?.reloads.failed).toBeGreaterThanOrEqual(1);
    expect((await servedCertificate(port, ca.ca.cert, 'localhost')).serialNumber).toBe(served);
    expect((await httpsGet(port, 'localhost')).status).toBe(200);
    const metrics = createEdgeMetrics(edge, 'test');
    cleanups.push(() => metrics.close());
    const { body } = await metrics.render();
    expect(body).toMatch(/^tunnel2_edge_tls_reloads_total\{result="failed"\} [1-9]/m);
    expect(body).toMatch(/^tunnel2_edge_tls_reloads_total\{result="ok"\} 0/m);
    // The same on a reload asked for (SIGHUP's path), with a half-written certificate.
    await writeFile(cert, '-----BEGIN CERTIFICATE-----\nMIIB');
    expect(edge.tls?.reload('SIGHUP')).toEqual({ changed: 0, failed: 1 });
    expect((await servedCertificate(port, ca.ca.cert, 'localhost')).serialNumber).toBe(served);
  });

  it('answers plain HTTP sent to the TLS port with a 400 that says to use https://, as nginx does', async () => {
    const { port } = await tlsEdge({
      tls: { pairs: [{ cert: localhost.certFile, key: localhost.keyFile }] },
    });
    const answer = await send({ port, path: '/', headers: ['Host', `localhost:${port}`] });
    expect(answer.status).toBe(400);
    expect(answer.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BAD_REQUEST');
    expect(answer.body.toString()).toContain('use https://');
    // A TLS client still gets its handshake.
    expect((await httpsGet(port, 'localhost')).status).toBe(200);
  });

  it('closes a connection whose TLS handshake never completes, and counts it against its address meanwhile', async () => {
    const { edge, port } = await tlsEdge({
      maxConnectionsPerAddress: 1,
      tls: { pairs: [{ cert: localhost.certFile, key: localhost.keyFile }], handshakeTimeoutMs: 300 },
    });
    const silentClient = netConnect(port, '127.0.0.1');
    await once(silentClient, 'connect');
    // A second connection from the same address while the first holds its place: closed at accept.
    const second = netConnect(port, '127.0.0.1');
    await once(second, 'close');
    expect(edge.publicConnections.dropped.per_address).toBe(1);
    // The first is closed by the edge once its handshake time is over, without a byte from the client.
    await once(silentClient, 'close');
    expect((await httpsGet(port, 'localhost')).status).toBe(200);
  });

  it('drains like the plain port: a kept-alive TLS connection and a handshake still pending are closed by close()', async () => {
    const edge = buildEdge({
      port: 0,
      logger: silent,
      keepAliveTimeoutMs: 200,
      tls: { pairs: [{ cert: localhost.certFile, key: localhost.keyFile }] },
    });
    const { port } = await edge.listen();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    cleanups.push(() => agent.destroy());
    expect((await httpsGet(port, 'localhost', '/', agent)).status).toBe(200);
    const pending = netConnect(port, '127.0.0.1');
    await once(pending, 'connect');
    await edge.close(5_000);
    await once(pending, 'close');
    // The port no longer accepts.
    const refused = netConnect(port, '127.0.0.1');
    const [err] = (await once(refused, 'error')) as [NodeJS.ErrnoException];
    expect(err.code).toBe('ECONNREFUSED');
  });
});

describe('a tunnel through a TLS edge', () => {
  it('carries requests from curl and from node:https to an agent connected over wss:// (the CA from NODE_EXTRA_CA_CERTS)', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const { port, edge } = await tlsEdge({
      tls: { pairs: [{ cert: localhost.certFile, key: localhost.keyFile }] },
    });
    const agent = spawnCli(
      ['http', String(backend.port), '--server', edge.url, '--subdomain', 'secure', '--json'],
      {
        NODE_EXTRA_CA_CERTS: ca.ca.file,
      },
    );
    cleanups.push(() => agent.kill('SIGKILL'));
    const ready = await agent.waitFor('ready');
    expect(String(ready.url)).toBe(`https://secure.localhost:${port}/`);

    const viaNode = await httpsGet(port, 'secure.localhost', '/loadtest/ping');
    expect(viaNode.status).toBe(200);
    // The backend learns the client came over https (it builds its own URLs, secure cookies, redirects).
    const seen = JSON.parse((await httpsGet(port, 'secure.localhost', '/echo/request/x')).body) as {
      rawHeaders: string[];
    };
    const header = (name: string): string | undefined =>
      seen.rawHeaders[seen.rawHeaders.findIndex((h, i) => i % 2 === 0 && h.toLowerCase() === name) + 1];
    expect(header('x-forwarded-proto')).toBe('https');
    expect(header('x-forwarded-host')).toBe(`secure.localhost:${port}`);

    const { stdout } = await run(findCommand('curl', 'curl'), [
      '--silent',
      '--show-error',
      '--cacert',
      ca.ca.file,
      '--resolve',
      `secure.localhost:${port}:127.0.0.1`,
      '--write-out',
      '\n%{http_code} %{scheme}',
      `https://secure.localhost:${port}/loadtest/ping`,
    ]);
    expect(stdout.trim().split('\n').at(-1)).toBe('200 HTTPS');
  });

  it('drains over TLS: a request in flight when close() begins gets its whole answer', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const edge = buildEdge({
      port: 0,
      logger: silent,
      tls: { pairs: [{ cert: localhost.certFile, key: localhost.keyFile }] },
    });
    const { port } = await edge.listen();
    const agent = spawnCli(
      ['http', String(backend.port), '--server', edge.url, '--subdomain', 'secure', '--json'],
      { NODE_EXTRA_CA_CERTS: ca.ca.file },
    );
    cleanups.push(() => agent.kill('SIGKILL'));
    await agent.waitFor('ready');
    // Twenty lines 40 ms apart: the answer is still streaming while the edge drains.
    const answer = httpsGet(port, 'secure.localhost', '/stream/20?interval=40');
    await until(() => edge.inFlight === 1, { what: 'the request in flight', timeoutMs: 10_000 });
    const closed = edge.close(10_000);
    const { status, body, headers } = await answer;
    expect(status).toBe(200);
    expect(headers.connection).toBe('close');
    expect(body).toBe(Array.from({ length: 20 }, (_, i) => `chunk ${i}\n`).join(''));
    await closed;
  });

  it('tells an agent that does not trust the edge certificate how to trust a private CA, not that no edge answers', async () => {
    const { edge } = await tlsEdge({
      tls: { pairs: [{ cert: localhost.certFile, key: localhost.keyFile }] },
    });
    // No NODE_EXTRA_CA_CERTS: the test CA is unknown to this agent.
    const agent = spawnCli(['http', '3000', '--server', edge.url, '--json']);
    cleanups.push(() => agent.kill('SIGKILL'));
    const error = await agent.waitFor('error');
    expect(error.code).toBe('TUNNEL2_ERR_EDGE_UNREACHABLE');
    expect(String(error.message)).toContain('not trusted');
    expect(String(error.message)).toContain('NODE_EXTRA_CA_CERTS');
    await agent.waitFor('reconnecting');
    expect(agent.events.filter((event) => event.event === 'hint')).toEqual([]);
  });

  it('carries a tunnelled WebSocket over wss:// on the same port (HTTP/1.1 upgrade)', async () => {
    const backend = await startWsBackend();
    cleanups.push(() => backend.close());
    const { port, edge } = await tlsEdge({
      tls: { pairs: [{ cert: localhost.certFile, key: localhost.keyFile }] },
    });
    const agent = spawnCli(
      ['http', String(backend.port), '--server', edge.url, '--subdomain', 'secure', '--json'],
      { NODE_EXTRA_CA_CERTS: ca.ca.file },
    );
    cleanups.push(() => agent.kill('SIGKILL'));
    await agent.waitFor('ready');
    // The SNI passes through to tls.connect (ws's types do not list it).
    const options: ClientOptions & { servername: string } = {
      headers: { host: `secure.localhost:${port}` },
      servername: 'secure.localhost',
      ca: ca.ca.cert,
    };
    const ws = new WebSocket(`wss://127.0.0.1:${port}/echo`, options);
    cleanups.push(() => ws.terminate());
    await once(ws, 'open');
    ws.send('over tls');
    const [message] = (await once(ws, 'message')) as [Buffer];
    expect(message.toString()).toBe('over tls');
  });
});
