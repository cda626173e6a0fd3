import { once } from 'node:events';
import { connect as netConnect, type Socket } from 'node:net';
import type { EdgeOptions } from '@tunnel2/edge';
import { afterEach, describe, expect, it } from 'vitest';
import { type ConnectOptions, connect } from '../src/index.js';
import { send } from './support/http-client.js';
import { rawExchange } from './support/raw-client.js';
import { type Stack, startStack } from './support/stack.js';

// Hostile or malformed client input at the edge's public port (issue #18): spoofed forwarding headers,
// request lines Node's parser lets through, CONNECT, connections that never send a byte, anonymous
// agents past the per-owner limit, and error pages that echo what the client sent.

interface Echo {
  rawHeaders: string[];
}

const stacks: Stack[] = [];
afterEach(async () => {
  for (const stack of stacks.splice(0)) await stack.close();
});

async function stack(edge: EdgeOptions = {}, tunnel: Partial<ConnectOptions> = {}) {
  const s = await startStack({ name: 'hygiene', edge, tunnel });
  stacks.push(s);
  return s;
}

function headerValues(raw: string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === name) out.push(raw[i + 1]!);
  return out;
}

const spoofed = [
  'X-Forwarded-For',
  '6.6.6.6',
  'X-Forwarded-Proto',
  'https',
  'X-Forwarded-Host',
  'evil.example',
  'X-Forwarded-Prefix',
  '/evil',
  'Forwarded',
  'for=6.6.6.6;proto=https;host=evil.example',
  'X-Real-IP',
  '6.6.6.6',
];

/** A raw answer's status line, headers (lowercased names) and body. */
function parseRaw(answer: string): { status: number; headers: Record<string, string>; body: string } {
  const end = answer.indexOf('\r\n\r\n');
  const [statusLine, ...lines] = answer.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(statusLine?.split(' ')[1]), headers, body: answer.slice(end + 4) };
}

describe('forwarding headers from an untrusted client', () => {
  it('are removed and replaced by the edge’s own, by host and by path', async () => {
    const s = await stack();
    const byHost = await send({
      port: s.port,
      path: '/echo/request/x',
      headers: ['Host', s.host, ...spoofed],
    });
    const seen = (JSON.parse(byHost.body.toString()) as Echo).rawHeaders;
    expect(headerValues(seen, 'x-forwarded-for')).toEqual(['127.0.0.1']);
    expect(headerValues(seen, 'x-forwarded-proto')).toEqual(['http']);
    expect(headerValues(seen, 'x-forwarded-host')).toEqual([s.host]);
    expect(headerValues(seen, 'x-forwarded-prefix')).toEqual([]);
    expect(headerValues(seen, 'forwarded')).toEqual([]);
    expect(headerValues(seen, 'x-real-ip')).toEqual([]);

    const byPath = await send({
      port: s.port,
      path: `/session/${s.name}/echo/request/x`,
      headers: ['Host', `localhost:${s.port}`, ...spoofed, 'x-forwarded-prefix', '/second'],
    });
    const seenByPath = (JSON.parse(byPath.body.toString()) as Echo).rawHeaders;
    expect(headerValues(seenByPath, 'x-forwarded-prefix')).toEqual([`/session/${s.name}`]);
    expect(headerValues(seenByPath, 'x-forwarded-for')).toEqual(['127.0.0.1']);
    expect(headerValues(seenByPath, 'forwarded')).toEqual([]);
  });

  it('do not move an --allow-ip check: the connection’s address decides', async () => {
    const s = await stack({}, { allowIps: ['10.0.0.2'] });
    const res = await send({
      port: s.port,
      path: '/loadtest/ping',
      headers: ['Host', s.host, 'X-Forwarded-For', '10.0.0.2', 'X-Real-IP', '10.0.0.2'],
    });
    expect(res.status).toBe(403);
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_PUBLIC_IP_FORBIDDEN');
  });
});

describe('forwarding headers from a trusted proxy (trustProxy)', () => {
  it('keeps its chain and appends the peer, takes its validated proto and host', async () => {
    const s = await stack({ trustProxy: ['127.0.0.1/32'] });
    const res = await send({
      port: s.port,
      path: '/echo/request/x',
      headers: [
        'Host',
        s.host,
        'X-Forwarded-For',
        '203.0.113.7',
        'X-Forwarded-For',
        '10.0.0.2',
        'X-Forwarded-Proto',
        'https',
        'X-Forwarded-Host',
        'app.example.com',
        'Forwarded',
        'for=6.6.6.6',
        'X-Real-IP',
        '6.6.6.6',
      ],
    });
    const seen = (JSON.parse(res.body.toString()) as Echo).rawHeaders;
    expect(headerValues(seen, 'x-forwarded-for')).toEqual(['203.0.113.7, 10.0.0.2, 127.0.0.1']);
    expect(headerValues(seen, 'x-forwarded-proto')).toEqual(['https']);
    expect(headerValues(seen, 'x-forwarded-host')).toEqual(['app.example.com']);
    expect(headerValues(seen, 'forwarded')).toEqual([]);
    expect(headerValues(seen, 'x-real-ip')).toEqual([]);
  });

  it('ignores an invalid proto or host from it and uses the edge’s own', async () => {
    const s = await stack({ trustProxy: ['127.0.0.1'] });
    const res = await send({
      port: s.port,
      path: '/echo/request/x',
      headers: ['Host', s.host, 'X-Forwarded-Proto', 'javascript', 'X-Forwarded-Host', 'a b/c@d'],
    });
    const seen = (JSON.parse(res.body.toString()) as Echo).rawHeaders;
    expect(headerValues(seen, 'x-forwarded-proto')).toEqual(['http']);
    expect(headerValues(seen, 'x-forwarded-host')).toEqual([s.host]);
    expect(headerValues(seen, 'x-forwarded-for')).toEqual(['127.0.0.1']);
  });

  it('--allow-ip sees the right-most untrusted address of the chain', async () => {
    const s = await stack({ trustProxy: ['127.0.0.1/32', '10.9.0.0/16'] }, { allowIps: ['10.0.0.2'] });
    const status = async (xff: string) =>
      (
        await send({
          port: s.port,
          path: '/loadtest/ping',
          headers: ['Host', s.host, 'X-Forwarded-For', xff],
        })
      ).status;
    expect(await status('10.0.0.2')).toBe(200);
    // A second trusted hop in between is skipped.
    expect(await status('10.0.0.2, 10.9.1.1')).toBe(200);
    expect(await status('10.0.0.3')).toBe(403);
    // What the client wrote on the left of the chain cannot stand in for its own address.
    expect(await status('10.0.0.2, 10.0.0.3')).toBe(403);
    expect(await status('not-an-address')).toBe(403);
  });
});

describe('request lines and heads the edge refuses', () => {
  it('two Host fields: 400', async () => {
    const s = await stack();
    const answer = parseRaw(
      await rawExchange(
        s.port,
        `GET /loadtest/ping HTTP/1.1\r\nHost: ${s.host}\r\nHost: other.localhost\r\n\r\n`,
      ),
    );
    expect(answer.status).toBe(400);
    expect(answer.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BAD_REQUEST');
    expect(answer.headers['x-content-type-options']).toBe('nosniff');
  });

  it('a request line without a version (HTTP/0.9): 400', async () => {
    const s = await stack();
    const answer = parseRaw(await rawExchange(s.port, 'GET /\r\n\r\n'));
    expect(answer.status).toBe(400);
    expect(answer.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BAD_REQUEST');
  });

  // `PRI * HTTP/2.0` followed by a Host line is not the HTTP/2 preface (which the port serves as h2c:
  // e2e-h2c.test.ts): it is an HTTP/1 request line with a version this port does not speak.
  for (const line of ['GET / HTTP/2.0', 'GET / HTTP/1.2', 'GET / HTTP/3.0', 'PRI * HTTP/2.0']) {
    it(`"${line}" on the HTTP/1 port: 505`, async () => {
      const s = await stack();
      const answer = parseRaw(await rawExchange(s.port, `${line}\r\nHost: ${s.host}\r\n\r\n`));
      expect(answer.status).toBe(505);
      expect(answer.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_HTTP_VERSION');
      expect(answer.headers['x-content-type-options']).toBe('nosniff');
    });
  }

  it('CONNECT: 405 with Allow, on a tunnel host and on the edge itself', async () => {
    const s = await stack();
    for (const host of [s.host, `localhost:${s.port}`]) {
      const answer = parseRaw(
        await rawExchange(s.port, `CONNECT example.com:443 HTTP/1.1\r\nHost: ${host}\r\n\r\n`),
      );
      expect(answer.status).toBe(405);
      expect(answer.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_METHOD_NOT_ALLOWED');
      expect(answer.headers.allow).toMatch(/GET/);
      expect(answer.headers.allow).not.toMatch(/CONNECT/);
      expect(answer.headers['x-content-type-options']).toBe('nosniff');
      expect(answer.body).toMatch(/CONNECT/);
    }
  });
});

describe('connections that never send a byte', () => {
  it('are closed after headersTimeoutMs without an answer; keep-alive and the agent still work', async () => {
    const s = await stack({ headersTimeoutMs: 300 });
    const silent: Socket[] = [];
    for (let i = 0; i < 20; i++) {
      const socket = netConnect(s.port, '127.0.0.1');
      socket.on('error', () => {});
      silent.push(socket);
    }
    const received: string[] = [];
    for (const socket of silent) socket.on('data', (chunk: Buffer) => received.push(chunk.toString()));
    await Promise.all(silent.map((socket) => once(socket, 'close')));
    expect(received).toEqual([]);

    // Two requests on one kept-alive connection, the second sent once the first has been answered.
    const client = netConnect(s.port, '127.0.0.1');
    await once(client, 'connect');
    let text = '';
    client.on('data', (chunk: Buffer) => {
      text += chunk.toString();
    });
    const ask = `GET /loadtest/ping HTTP/1.1\r\nHost: ${s.host}\r\n\r\n`;
    client.write(ask);
    while ((text.match(/HTTP\/1\.1 200/g) ?? []).length < 1) await once(client, 'data');
    client.write(ask);
    while ((text.match(/HTTP\/1\.1 200/g) ?? []).length < 2) await once(client, 'data');
    client.destroy();

    // The agent's WebSocket was opened before and carries requests after.
    const res = await send({ port: s.port, path: '/loadtest/ping', headers: ['Host', s.host] });
    expect(res.status).toBe(200);
  });
});

describe('anonymous agents and the per-owner limit', () => {
  it('count by client address: new agent keys do not get past maxSessionsPerOwner', async () => {
    const s = await stack({ maxSessionsPerOwner: 2 });
    // The stack's own agent is the first; one more fits, the third is refused.
    const second = await connect({ target: s.backend.port, server: s.edge.url, subdomain: 'second' });
    stacks.push({ close: () => second.close(0) } as Stack);
    await expect(
      connect({ target: s.backend.port, server: s.edge.url, subdomain: 'third' }),
    ).rejects.toMatchObject({ status: 429, edgeCode: 'TUNNEL2_ERR_TOO_MANY_SESSIONS' });
  });
});

describe('error pages', () => {
  it('carry nosniff and quote, clean and bound what they echo', async () => {
    const s = await stack();
    const longName = 'a'.repeat(3000);
    const unknown = await send({
      port: s.port,
      path: `/session/${longName}/x`,
      headers: ['Host', `localhost:${s.port}`],
    });
    expect(unknown.status).toBe(404);
    expect(unknown.headers['x-content-type-options']).toBe('nosniff');
    expect(unknown.body.length).toBeLessThan(600);
    expect(unknown.body.toString()).toMatch(/"a+…"/);

    const notFound = await send({
      port: s.port,
      path: `/${'b'.repeat(5000)}`,
      headers: ['Host', `localhost:${s.port}`],
    });
    expect(notFound.status).toBe(404);
    expect(notFound.headers['x-content-type-options']).toBe('nosniff');
    expect(notFound.body.length).toBeLessThan(600);

    const upgrade = parseRaw(
      await rawExchange(
        s.port,
        `GET /nowhere HTTP/1.1\r\nHost: localhost:${s.port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`,
      ),
    );
    expect(upgrade.status).toBe(404);
    expect(upgrade.headers['x-content-type-options']).toBe('nosniff');

    const malformed = parseRaw(await rawExchange(s.port, 'NOT HTTP AT ALL\r\n\r\n'));
    expect(malformed.status).toBe(400);
    expect(malformed.headers['x-content-type-options']).toBe('nosniff');

    const landing = await send({ port: s.port, path: '/', headers: ['Host', `x${'c'.repeat(2000)}:1`] });
    expect(landing.headers['x-content-type-options']).toBe('nosniff');
    expect(landing.body.length).toBeLessThan(1000);
  });

  it('the landing page shows the session count only when showSessionCount is set', async () => {
    const hidden = await stack();
    const page = await send({ port: hidden.port, path: '/', headers: ['Host', `localhost:${hidden.port}`] });
    expect(page.status).toBe(200);
    expect(page.body.toString()).not.toMatch(/Sessions/);
    const shown = await stack({ showSessionCount: true });
    const counted = await send({ port: shown.port, path: '/', headers: ['Host', `localhost:${shown.port}`] });
    expect(counted.body.toString()).toMatch(/Sessions on this node: 1/);
  });
});
