import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { okResponse, type RawBackend, startRawBackend } from './support/raw-backend.js';
import { rawExchange } from './support/raw-client.js';
import { silent } from './support/stack.js';

// The configured target and an "evil" server on another loopback port: whatever a client writes, only the
// target may ever be contacted — the evil one must not receive a single connection.
let target: RawBackend;
let evil: RawBackend;
let edge: Edge;
let tunnel: Tunnel;
let port: number;

beforeAll(async () => {
  target = await startRawBackend((socket) => socket.write(okResponse('target')));
  evil = await startRawBackend((socket) => socket.write(okResponse('evil')));
  edge = buildEdge({ port: 0, logger: silent });
  ({ port } = await edge.listen());
  tunnel = await connect({ target: `127.0.0.1:${target.port}`, server: edge.url, subdomain: 'ssrf' });
});
afterAll(async () => {
  await tunnel.close(0);
  await edge.close(0);
  await target.close();
  await evil.close();
});

describe('SSRF attempts reach nothing but the configured target', () => {
  const attacks = (): [string, string, string][] => {
    const e = `127.0.0.1:${evil.port}`;
    const host = `ssrf.localhost:${port}`;
    const byHost: [string, string][] = [
      [`//${e}/x`, host],
      [`///${e}/x`, host],
      [`/..%2f..%2f${e}/x`, host],
      [`/%2e%2e/%2e%2e/${e}/x`, host],
      [`/../../${e}/x`, host],
      [`/@${e}/x`, host],
      [`http://${e}/x`, host],
      [`http://${host}@${e}/x`, host],
      [`http://${e}@${host}/x`, host],
      [`/x`, `${host}@${e}`],
      [`/x`, `${e}`],
    ];
    const byPath: [string, string][] = [
      [`/session/ssrf//${e}/x`, `localhost:${port}`],
      [`/session/ssrf/..%2f..%2f${e}/x`, `localhost:${port}`],
      [`/session/ssrf/../../${e}/x`, `localhost:${port}`],
      [`/session/ssrf@${e}/x`, `localhost:${port}`],
      [`/session/ssrf/@${e}/x`, `localhost:${port}`],
      [`http://localhost:${port}/session/ssrf//${e}/x`, `localhost:${port}`],
      [`http://${e}/session/ssrf/x`, `localhost:${port}`],
    ];
    return [
      ...byHost.map(([t, h]): [string, string, string] => ['host', t, h]),
      ...byPath.map(([t, h]): [string, string, string] => ['path', t, h]),
    ];
  };

  it('through both URL forms, every request either reaches the target or is refused by the edge', async () => {
    const before = target.received.length;
    let reachedTarget = 0;
    for (const [form, requestTarget, host] of attacks()) {
      const answer = await rawExchange(
        port,
        `GET ${requestTarget} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
      );
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
      expect([200, 400, 404], `${form} ${requestTarget} (Host ${host}) → ${status}`).toContain(status);
      expect(answer).not.toContain('evil');
      if (status === 200) {
        expect(answer).toContain('target');
        reachedTarget++;
      }
    }
    expect(target.received.length - before).toBe(reachedTarget);
    // The agent forwards only to its configured origin: a path that looks like an authority stays a path.
    for (const request of target.received) expect(request.path.startsWith('/')).toBe(true);
    expect(evil.connections).toBe(0);
  });

  it('CONNECT to another host is refused and contacts nobody', async () => {
    const answer = await rawExchange(
      port,
      `CONNECT 127.0.0.1:${evil.port} HTTP/1.1\r\nHost: 127.0.0.1:${evil.port}\r\n\r\n`,
    );
    expect(answer).not.toMatch(/^HTTP\/1\.1 2/);
    expect(evil.connections).toBe(0);
  });
});
