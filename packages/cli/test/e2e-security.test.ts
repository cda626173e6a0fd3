import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect as netConnect } from 'node:net';
import { Writable } from 'node:stream';
import { buildEdge, createSignedToken, type EdgeOptions } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { connect } from '../src/index.js';
import { send } from './support/http-client.js';
import { cli } from './support/processes.js';
import { silent, until } from './support/stack.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const SECRET = 'a-test-secret-of-enough-length';

async function setup(edgeOptions: EdgeOptions = {}) {
  const backend = await createTestBackend();
  cleanups.push(() => backend.close());
  const edge = buildEdge({ port: 0, logger: silent, ...edgeOptions });
  const { port, url } = await edge.listen();
  cleanups.push(() => edge.close(0));
  return { backend, edge, port, url };
}

describe('agent authentication', () => {
  it('refuses agents without a token, or with a wrong one, with 401 before the upgrade', async () => {
    const { url, backend } = await setup({ auth: { tokens: ['right-token'] } });
    await expect(connect({ target: backend.port, server: url, subdomain: 'a' })).rejects.toMatchObject({
      status: 401,
      edgeCode: 'TUNNEL2_ERR_AGENT_TOKEN_MISSING',
      fatal: true,
    });
    await expect(
      connect({ target: backend.port, server: url, subdomain: 'a', token: 'wrong' }),
    ).rejects.toMatchObject({
      status: 401,
      edgeCode: 'TUNNEL2_ERR_AGENT_TOKEN_INVALID',
    });
    const tunnel = await connect({ target: backend.port, server: url, subdomain: 'a', token: 'right-token' });
    cleanups.push(() => tunnel.close(0));
    expect(tunnel.info?.name).toBe('a');
  });

  it('accepts signed tokens until they expire', async () => {
    const { url, backend } = await setup({ auth: { tokenSecret: SECRET } });
    const good = createSignedToken(SECRET, 'alice', 60);
    const tunnel = await connect({ target: backend.port, server: url, subdomain: 'signed', token: good });
    cleanups.push(() => tunnel.close(0));
    const expired = createSignedToken(SECRET, 'alice', 60, Date.now() - 120_000);
    await expect(
      connect({ target: backend.port, server: url, subdomain: 'late', token: expired }),
    ).rejects.toMatchObject({
      status: 401,
      edgeCode: 'TUNNEL2_ERR_AGENT_TOKEN_EXPIRED',
    });
    const forged = createSignedToken('another-secret-of-enough-length', 'alice', 60);
    await expect(
      connect({ target: backend.port, server: url, subdomain: 'forged', token: forged }),
    ).rejects.toMatchObject({
      edgeCode: 'TUNNEL2_ERR_AGENT_TOKEN_INVALID',
    });
  });

  it('never writes a token into the logs', async () => {
    let logs = '';
    const sink = new Writable({
      write(chunk, _encoding, done) {
        logs += String(chunk);
        done();
      },
    });
    const token = `secret-${randomBytes(8).toString('hex')}`;
    const { url, backend, port } = await setup({
      auth: { tokens: [token] },
      logger: pino({ level: 'trace' }, sink),
    });
    const tunnel = await connect({ target: backend.port, server: url, subdomain: 'logged', token });
    await send({ port, path: '/loadtest/ping', headers: ['Host', `logged.localhost:${port}`] });
    await tunnel.close(0);
    await expect(
      connect({ target: backend.port, server: url, subdomain: 'x', token: `${token}-wrong` }),
    ).rejects.toThrow();
    expect(logs.length).toBeGreaterThan(0);
    expect(logs).not.toContain(token);
  });

  it('refuses to accept agents on a non-loopback address without auth unless told to', () => {
    expect(() => buildEdge({ host: '0.0.0.0', logger: silent })).toThrow(/without authentication/);
    expect(() =>
      buildEdge({ host: '0.0.0.0', logger: silent, auth: { allowAnonymous: true } }),
    ).not.toThrow();
    expect(() => buildEdge({ host: '0.0.0.0', logger: silent, auth: { tokens: ['t'] } })).not.toThrow();
  });

  it('the CLI prints one clear line and exits 1 on a bad token', async () => {
    const { url, backend } = await setup({ auth: { tokens: ['right-token'] } });
    const result = await cli(['http', String(backend.port), '--server', url, '--token', 'nope']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('the agent token is not valid for this edge');
    expect(result.stderr).not.toContain('    at ');
  });

  it('`tunnel2 server` refuses a public address without auth, naming the fix', async () => {
    const result = await cli(['server', '--host', '0.0.0.0', '--port', '0']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('without authentication');
  });
});

describe('session ownership', () => {
  it('a name belongs to its token: another token gets 409, the same token takes over and the older agent stops', async () => {
    const { url, backend, edge } = await setup({ auth: { tokens: ['alice', 'bob'] } });
    const first = await connect({ target: backend.port, server: url, subdomain: 'owned', token: 'alice' });
    const errors: string[] = [];
    first.on('error', (e) => errors.push(e.code));
    cleanups.push(() => first.close(0));
    await expect(
      connect({ target: backend.port, server: url, subdomain: 'owned', token: 'bob' }),
    ).rejects.toMatchObject({
      status: 409,
    });
    const second = await connect({ target: backend.port, server: url, subdomain: 'owned', token: 'alice' });
    cleanups.push(() => second.close(0));
    await until(() => errors.includes('TUNNEL2_ERR_REPLACED'));
    expect(edge.sessions.get('owned')).toBeDefined();
  });

  it('limits the sessions one token may hold', async () => {
    const { url, backend } = await setup({ auth: { tokens: ['t'] }, maxSessionsPerOwner: 2 });
    for (const name of ['one', 'two']) {
      const tunnel = await connect({ target: backend.port, server: url, subdomain: name, token: 't' });
      cleanups.push(() => tunnel.close(0));
    }
    await expect(
      connect({ target: backend.port, server: url, subdomain: 'three', token: 't' }),
    ).rejects.toMatchObject({
      status: 429,
      edgeCode: 'TUNNEL2_ERR_TOO_MANY_SESSIONS',
    });
  });
});

describe('public URL protection set by the agent', () => {
  it('--basic-auth: 401 with a challenge without credentials, 200 with them', async () => {
    const { url, backend, port } = await setup();
    const tunnel = await connect({
      target: backend.port,
      server: url,
      subdomain: 'guarded',
      basicAuth: 'ann:s3cret',
    });
    cleanups.push(() => tunnel.close(0));
    const host = `guarded.localhost:${port}`;
    const anonymous = await send({ port, path: '/loadtest/ping', headers: ['Host', host] });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers['www-authenticate']).toContain('Basic');
    const wrong = await send({
      port,
      path: '/loadtest/ping',
      headers: ['Host', host, 'Authorization', `Basic ${Buffer.from('ann:nope').toString('base64')}`],
    });
    expect(wrong.status).toBe(401);
    const right = await send({
      port,
      path: '/loadtest/ping',
      headers: ['Host', host, 'Authorization', `Basic ${Buffer.from('ann:s3cret').toString('base64')}`],
    });
    expect(right.status).toBe(200);
    expect(right.body.toString()).toBe('pong');
  });

  it('--allow-ip: 403 for other addresses, 200 for allowed ones', async () => {
    const { url, backend, port } = await setup();
    const closed = await connect({
      target: backend.port,
      server: url,
      subdomain: 'closed',
      allowIps: ['10.0.0.0/8'],
    });
    cleanups.push(() => closed.close(0));
    const open = await connect({
      target: backend.port,
      server: url,
      subdomain: 'open',
      allowIps: ['127.0.0.1/32', '::1'],
    });
    cleanups.push(() => open.close(0));
    const denied = await send({
      port,
      path: '/loadtest/ping',
      headers: ['Host', `closed.localhost:${port}`],
    });
    expect(denied.status).toBe(403);
    expect(denied.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_PUBLIC_IP_FORBIDDEN');
    const allowed = await send({ port, path: '/loadtest/ping', headers: ['Host', `open.localhost:${port}`] });
    expect(allowed.status).toBe(200);
  });

  it('rejects malformed protection flags in the agent with a clear error', async () => {
    await expect(connect({ target: 1, server: 'http://127.0.0.1:1', basicAuth: 'no-colon' })).rejects.toThrow(
      '--basic-auth must be user:password',
    );
    await expect(
      connect({ target: 1, server: 'http://127.0.0.1:1', allowIps: ['300.1.1.1'] }),
    ).rejects.toThrow('is not an IP address or CIDR block');
  });
});

describe('limits', () => {
  it('a declared body over the limit is refused with 413 before anything reaches the backend', async () => {
    const { url, backend, port } = await setup({ maxRequestBodyBytes: 1024 });
    const tunnel = await connect({ target: backend.port, server: url, subdomain: 'small' });
    cleanups.push(() => tunnel.close(0));
    const before = backend.stats.requests;
    const res = await send({
      port,
      path: '/upload',
      method: 'POST',
      headers: ['Host', `small.localhost:${port}`, 'Content-Length', '2048'],
      body: randomBytes(2048),
    }).catch((err: Error) => err);
    if (res instanceof Error) throw res;
    expect(res.status).toBe(413);
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BODY_TOO_LARGE');
    expect(backend.stats.requests).toBe(before);
  });

  it('a streamed body that grows past the limit is cut off with 413', async () => {
    const { url, backend, port } = await setup({ maxRequestBodyBytes: 64 * 1024 });
    const tunnel = await connect({ target: backend.port, server: url, subdomain: 'stream' });
    cleanups.push(() => tunnel.close(0));
    const socket = netConnect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.write(
      `POST /upload HTTP/1.1\r\nHost: stream.localhost:${port}\r\nTransfer-Encoding: chunked\r\n\r\n`,
    );
    const chunk = randomBytes(16 * 1024);
    // 128 KiB in 16 KiB chunks: the limit is crossed at the fifth.
    for (let i = 0; i < 8; i++)
      socket.write(`${chunk.length.toString(16)}\r\n${chunk.toString('latin1')}\r\n`, 'latin1');
    let answer = '';
    socket.on('data', (data: Buffer) => {
      answer += data.toString('latin1');
    });
    socket.on('error', () => {});
    await once(socket, 'close');
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer).toContain('TUNNEL2_ERR_BODY_TOO_LARGE');
  });
});
