import { connect as h2Connect, type OutgoingHttpHeaders } from 'node:http2';
import { request as httpsRequest } from 'node:https';
import { makeTestCa, type TestCa } from '@tunnel2/test-services';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { h2Request } from './support/h2-client.js';
import { send } from './support/http-client.js';
import { type Spawned, spawnCli } from './support/processes.js';

// The edge's own pages (the landing page, the operations paths it serves on the public port when told to,
// its 404) answer over HTTP/2 as over HTTP/1.1: a browser that reaches the edge's host over TLS negotiates
// h2 and must not get a 404 where HTTP/1.1 gets the landing page. Over h2c (prior knowledge on the plain
// port) and over TLS (ALPN h2), each compared with HTTP/1.1 on the same port.

type Transport = 'h2c' | 'tls';

interface Answer {
  status: number;
  type: string | undefined;
  body: string;
}

let ca: TestCa;
let certificate: { certFile: string; keyFile: string };
beforeAll(async () => {
  ca = await makeTestCa();
  certificate = await ca.issue('edge', ['localhost', '127.0.0.1']);
});
afterAll(async () => {
  await ca?.dispose();
});

describe.each<Transport>(['h2c', 'tls'])("the edge's own pages over %s", (transport) => {
  let edge: Spawned;
  let port: number;
  beforeAll(async () => {
    const args = ['server', '--port', '0', '--json', '--log-level', 'warn', '--ops-on-public-port'];
    if (transport === 'tls') args.push('--tls-cert', certificate.certFile, '--tls-key', certificate.keyFile);
    edge = spawnCli(args);
    port = Number(new URL(String((await edge.waitFor('listening')).url)).port);
  });
  afterAll(async () => {
    edge?.kill('SIGTERM');
    await edge?.exited;
  });

  /** A GET over HTTP/1.1 on a fresh connection. */
  async function overHttp1(path: string, headers: Record<string, string>): Promise<Answer> {
    const host = `localhost:${port}`;
    if (transport === 'h2c') {
      const flat = Object.entries(headers).flat();
      const res = await send({ port, path, headers: ['Host', host, ...flat] });
      return { status: res.status, type: res.headers['content-type'], body: res.body.toString() };
    }
    return new Promise((resolve, reject) => {
      const req = httpsRequest({
        host: '127.0.0.1',
        port,
        path,
        servername: 'localhost',
        headers: { host, ...headers },
        ca: ca.ca.cert,
        agent: false,
        // Node's https client offers no ALPN: the TLS port serves it HTTP/1.1.
      });
      req.on('error', reject);
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            type: res.headers['content-type'],
            body: Buffer.concat(chunks).toString(),
          }),
        );
      });
      req.end();
    });
  }

  /** The same GET over HTTP/2 (prior knowledge, or ALPN h2). */
  async function overHttp2(path: string, headers: Record<string, string>): Promise<Answer> {
    const session =
      transport === 'h2c'
        ? h2Connect(`http://127.0.0.1:${port}`)
        : h2Connect(`https://localhost:${port}`, { ca: ca.ca.cert });
    session.on('error', () => {});
    const fields: OutgoingHttpHeaders = { ':path': path, ':authority': `localhost:${port}`, ...headers };
    const answer = await h2Request(session, fields);
    session.close();
    if (transport === 'tls') expect(session.alpnProtocol).toBe('h2');
    return {
      status: answer.status,
      type: answer.headers['content-type'] as string | undefined,
      body: answer.body.toString(),
    };
  }

  it('answers the landing page, the health paths and the 404 as HTTP/1.1 does', async () => {
    for (const path of ['/', '/healthz', '/readyz', '/no/such/page']) {
      // The same request id on both: an HTML error page names it.
      const asked: Record<string, string>[] = [
        { 'x-request-id': 'same-id' },
        { accept: 'text/html', 'x-request-id': 'same-id' },
      ];
      for (const headers of asked) {
        const one = await overHttp1(path, headers);
        const two = await overHttp2(path, headers);
        expect({ path, ...two }).toEqual({ path, ...one });
      }
    }
    const landing = await overHttp2('/', {});
    expect(landing.status).toBe(200);
    expect(landing.body).toContain('tunnel2 edge');
  });

  it('answers a large upload to its own host and closes the stream (the unread body is stopped)', async () => {
    const session =
      transport === 'h2c'
        ? h2Connect(`http://127.0.0.1:${port}`)
        : h2Connect(`https://localhost:${port}`, { ca: ca.ca.cert });
    session.on('error', () => {});
    const body = Array.from({ length: 64 }, () => Buffer.alloc(64 * 1024, 1));
    // 4 MiB, past any window: an answer that waited for the whole body, or a stream left open, never ends.
    const answer = await h2Request(
      session,
      { ':method': 'POST', ':path': '/upload', ':authority': `localhost:${port}` },
      { body },
    );
    session.close();
    expect(answer.status).toBe(404);
  });

  it('answers /metrics over HTTP/2 too', async () => {
    const one = await overHttp1('/metrics', {});
    const two = await overHttp2('/metrics', {});
    expect(two.status).toBe(one.status);
    expect(two.type).toBe(one.type);
    expect(two.body).toContain('tunnel2_sessions_connected 0');
  });
});
