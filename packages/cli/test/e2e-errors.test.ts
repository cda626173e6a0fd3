import { createServer } from 'node:net';
import { buildEdge } from '@tunnel2/edge';
import { afterEach, describe, expect, it } from 'vitest';
import { connect } from '../src/index.js';
import { send } from './support/http-client.js';
import { spawnCli } from './support/processes.js';
import { silent, startStack, until } from './support/stack.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function startEdge(options: Parameters<typeof buildEdge>[0] = {}) {
  const edge = buildEdge({ port: 0, logger: silent, ...options });
  const { port, url } = await edge.listen();
  cleanups.push(() => edge.close(0));
  return { edge, port, url };
}

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('clear, specific errors', () => {
  it('unknown session → 404 naming the session, by host and by path', async () => {
    const { port } = await startEdge();
    const byHost = await send({ port, path: '/', headers: ['Host', `nobody.localhost:${port}`] });
    expect(byHost.status).toBe(404);
    expect(byHost.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_UNKNOWN_SESSION');
    expect(byHost.body.toString()).toContain('nobody');
    const byPath = await send({ port, path: '/session/ghost/x', headers: ['Host', `localhost:${port}`] });
    expect(byPath.status).toBe(404);
    expect(byPath.body.toString()).toContain('ghost');
  });

  it('agent offline → 502 "tunnel offline" while the name is reserved', async () => {
    // A short reconnect wait: the wait itself is proven in e2e-limits.test.ts.
    const { edge, port, url } = await startEdge({ reconnectWaitMs: 200 });
    const backendPort = await closedPort();
    // A crash: an agent closed gracefully frees its name at once (e2e-names-restart.test.ts).
    const agent = spawnCli(['http', String(backendPort), '--server', url, '--subdomain', 'gone', '--json']);
    await agent.waitFor('ready');
    agent.kill('SIGKILL');
    await agent.exited;
    await until(() => edge.sessions.get('gone') === undefined);
    const res = await send({ port, path: '/', headers: ['Host', `gone.localhost:${port}`] });
    expect(res.status).toBe(502);
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_TUNNEL_OFFLINE');
    expect(res.body.toString()).toContain('offline');
  });

  it('backend refused → 502 "backend refused connection on <target>"', async () => {
    const { port, url } = await startEdge();
    const backendPort = await closedPort();
    const tunnel = await connect({ target: `127.0.0.1:${backendPort}`, server: url, subdomain: 'refused' });
    cleanups.push(() => tunnel.close(0));
    const res = await send({ port, path: '/x', headers: ['Host', `refused.localhost:${port}`] });
    expect(res.status).toBe(502);
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_BACKEND_UNREACHABLE');
    expect(res.body.toString()).toContain(`backend refused connection on 127.0.0.1:${backendPort}`);
  });

  it('no response head within the timeout → 504, and the backend request is cancelled', async () => {
    const stack = await startStack({ name: 'slow', edge: { responseTimeoutMs: 300 } });
    cleanups.push(() => stack.close());
    const aborted = stack.backend.nextAbort('/loadtest/delay/');
    const sent = performance.now();
    const res = await send({ port: stack.port, path: '/loadtest/delay/5000', headers: ['Host', stack.host] });
    // Never before the timeout (the edge's shared deadline sweep may be late by a tenth, never early); an
    // upper bound would be a timed assertion on a shared machine.
    expect(performance.now() - sent).toBeGreaterThanOrEqual(300);
    expect(res.status).toBe(504);
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_RESPONSE_TIMEOUT');
    // The backend sees its request go away: the timeout cancelled the stream, the agent the request.
    expect(await aborted).toBe('/loadtest/delay/5000');
  });

  it('a name held by another agent → the CLI API rejects with 409', async () => {
    const stack = await startStack({ name: 'taken' });
    cleanups.push(() => stack.close());
    const attempt = connect({ target: stack.backend.port, server: stack.edge.url, subdomain: 'taken' });
    await expect(attempt).rejects.toMatchObject({
      status: 409,
      edgeCode: 'TUNNEL2_ERR_NAME_IN_USE',
      fatal: true,
    });
  });

  it('an invalid subdomain is refused with 400 naming the rule', async () => {
    const { url } = await startEdge();
    const attempt = connect({ target: 1, server: url, subdomain: 'Not_Valid!' });
    await expect(attempt).rejects.toMatchObject({ status: 400, edgeCode: 'TUNNEL2_ERR_INVALID_NAME' });
  });

  it('connect() rejects with a clear error when the edge is unreachable', async () => {
    const edgePort = await closedPort();
    const attempt = connect({ target: 1, server: `http://127.0.0.1:${edgePort}`, subdomain: 'nowhere' });
    await expect(attempt).rejects.toMatchObject({
      code: 'TUNNEL2_ERR_EDGE_UNREACHABLE',
      message: expect.stringContaining(`cannot reach the edge at http://127.0.0.1:${edgePort}: ECONNREFUSED`),
    });
  });

  it('the edge answers its own 404 for non-tunnel paths', async () => {
    const { port } = await startEdge();
    const res = await send({ port, path: '/nope', headers: ['Host', `localhost:${port}`] });
    expect(res.status).toBe(404);
    expect(res.body.toString()).toContain('not a tunnel URL');
  });
});
