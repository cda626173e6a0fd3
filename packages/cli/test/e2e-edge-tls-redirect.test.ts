import { once } from 'node:events';
import { mkdir, writeFile } from 'node:fs/promises';
import { connect as netConnect } from 'node:net';
import { join } from 'node:path';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { type IssuedCertificate, makeTestCa, type TestCa } from '@tunnel2/test-services';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { send } from './support/http-client.js';
import { silent } from './support/stack.js';

// The plain port beside a TLS edge (`httpPort`): its 308s to https://, its ACME answers, its connection cap.

let ca: TestCa;
let localhost: IssuedCertificate;
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  ca = await makeTestCa();
  localhost = await ca.issue('localhost', ['localhost', '127.0.0.1']);
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

describe('the httpPort of a TLS edge', () => {
  it('redirects the plain httpPort to https with 308 and serves ACME challenges from acmeDir, nothing outside it', async () => {
    const acme = join(ca.dir, 'acme');
    await mkdir(acme);
    await writeFile(join(acme, 'tok-EN_123'), 'tok-EN_123.thumbprint');
    await writeFile(join(ca.dir, 'secret'), 'outside');
    const { edge, port } = await tlsEdge({
      tls: { pairs: [{ cert: localhost.certFile, key: localhost.keyFile }], httpPort: 0, acmeDir: acme },
    });
    const httpPort = edge.tls?.httpPort;
    expect(httpPort).toBeGreaterThan(0);
    const redirect = await send({
      port: httpPort!,
      path: '/some/path?q=1',
      method: 'POST',
      headers: ['Host', `demo.localhost:${httpPort}`],
    });
    expect(redirect.status).toBe(308);
    expect(redirect.headers.location).toBe(`https://demo.localhost:${port}/some/path?q=1`);
    const challenge = await send({
      port: httpPort!,
      path: '/.well-known/acme-challenge/tok-EN_123',
      headers: ['Host', 'demo.localhost'],
    });
    expect(challenge.status).toBe(200);
    expect(challenge.body.toString()).toBe('tok-EN_123.thumbprint');
    for (const path of [
      '/.well-known/acme-challenge/..%2Fsecret',
      '/.well-known/acme-challenge/../secret',
      '/.well-known/acme-challenge/tok.EN',
      '/.well-known/acme-challenge/missing',
    ]) {
      const refused = await send({ port: httpPort!, path, headers: ['Host', 'demo.localhost'] });
      expect(refused.status, path).toBe(404);
      expect(refused.body.toString()).not.toContain('outside');
    }
    const badHost = await send({ port: httpPort!, path: '/', headers: ['Host', 'evil.example/"><x'] });
    expect(badHost.status).toBe(400);
  });

  it('holds the redirect port to maxConnectionsPerAddress too, counted with the TLS port', async () => {
    const { edge, port } = await tlsEdge({
      maxConnectionsPerAddress: 1,
      tls: { pairs: [{ cert: localhost.certFile, key: localhost.keyFile }], httpPort: 0 },
    });
    const held = netConnect(edge.tls!.httpPort!, '127.0.0.1');
    cleanups.push(() => held.destroy());
    await once(held, 'connect');
    const answer = (target: number): Promise<string> =>
      new Promise((resolve) => {
        const socket = netConnect(target, '127.0.0.1');
        let text = '';
        socket.on('data', (chunk: Buffer) => {
          text += chunk.toString('latin1');
        });
        socket.on('error', () => {});
        socket.on('close', () => resolve(text));
        socket.end('GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
      });
    // The address holds its one place on the redirect port: a second connection there, or to the TLS
    // port, is closed at accept, unanswered.
    expect(await answer(edge.tls!.httpPort!)).toBe('');
    expect(edge.publicConnections.dropped.per_address).toBe(1);
    const tls = netConnect(port, '127.0.0.1');
    await once(tls, 'close');
    expect(edge.publicConnections.dropped.per_address).toBe(2);
    held.destroy();
    await once(held, 'close');
    expect(await answer(edge.tls!.httpPort!)).toMatch(/^HTTP\/1\.1 308 /);
  });

  it('redirects to the port of an https publicUrl, not the port bound (a container mapping 443 to it)', async () => {
    const { edge, port } = await tlsEdge({
      publicUrl: 'https://tunnel.test',
      domain: 'tunnel.test',
      tls: { pairs: [{ cert: localhost.certFile, key: localhost.keyFile }], httpPort: 0 },
    });
    expect(port).not.toBe(443);
    const toDefault = await send({
      port: edge.tls!.httpPort!,
      path: '/x?y=1',
      headers: ['Host', 'demo.tunnel.test'],
    });
    expect(toDefault.status).toBe(308);
    expect(toDefault.headers.location).toBe('https://demo.tunnel.test/x?y=1');
    const mapped = await tlsEdge({
      publicUrl: 'https://tunnel.test:8443',
      domain: 'tunnel.test',
      tls: { pairs: [{ cert: localhost.certFile, key: localhost.keyFile }], httpPort: 0 },
    });
    const toMapped = await send({
      port: mapped.edge.tls!.httpPort!,
      path: '/',
      headers: ['Host', 'demo.tunnel.test:80'],
    });
    expect(toMapped.headers.location).toBe('https://demo.tunnel.test:8443/');
  });
});
