import { once } from 'node:events';
import { createServer, type IncomingMessage, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildEdge, type Edge } from '@tunnel2/edge';
import type { EntrySummary } from '@tunnel2/inspector';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type RequestReport, type Tunnel } from '../src/index.js';
import { silent } from './support/stack.js';

/**
 * A backend that answers `Expect: 100-continue` requests (carried by node:http, not undici) with a head and
 * part of a body, then dies.
 */
function dyingBackend(): Promise<Server> {
  const server = createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '100' });
    res.write('only ten b', () => res.socket?.destroy());
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

describe('inspector: a backend failing mid-response on the node:http path', () => {
  let backend: Server;
  let edge: Edge;
  let port: number;
  let tunnel: Tunnel;

  beforeAll(async () => {
    backend = await dyingBackend();
    edge = buildEdge({ port: 0, logger: silent });
    ({ port } = await edge.listen());
    tunnel = await connect({
      target: (backend.address() as AddressInfo).port,
      server: edge.url,
      subdomain: 'dying',
      inspect: { port: 0 },
    });
  });

  afterAll(async () => {
    await tunnel.close(0);
    await edge.close(0);
    await new Promise((r) => backend.close(r));
  });

  it('is reported as a request with its error and recorded as an entry', async () => {
    const reported = once(tunnel, 'request') as Promise<[RequestReport]>;
    const req = request({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: '/upload',
      agent: false,
      headers: { host: `dying.localhost:${port}`, expect: '100-continue', 'content-length': '5' },
    });
    req.on('continue', () => req.end('hello'));
    req.on('error', () => {});
    await new Promise<void>((resolve) =>
      req.on('response', (res: IncomingMessage) => {
        res.on('error', () => {});
        res.on('close', resolve);
        res.resume();
      }),
    );
    const [report] = await reported;
    expect(report).toMatchObject({ method: 'POST', path: '/upload', status: 200 });
    expect(report.error).toMatch(/backend failed mid-response/);
    const list = (await (await fetch(`${tunnel.inspectorUrl}/api/entries`)).json()) as {
      entries: EntrySummary[];
    };
    expect(list.entries).toHaveLength(1);
    expect(list.entries[0]!.status).toBe(200);
    expect(list.entries[0]!.error?.message).toMatch(/backend failed mid-response/);
  });
});
