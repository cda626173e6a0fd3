import { request } from 'node:http';
import { buildEdge } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { afterEach, describe, expect, it } from 'vitest';
import { connect } from '../src/index.js';
import { send } from './support/http-client.js';
import { spawnCli } from './support/processes.js';
import { silent, until } from './support/stack.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Sends a request and resolves with its status (0 if the connection failed). */
function status(port: number, host: string, path: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { host }, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', () => resolve(0));
    });
    req.on('error', () => resolve(0));
    req.end();
  });
}

describe('liveness and drain', () => {
  it('a frozen agent (SIGSTOP) is detected within two heartbeats: in-flight requests get 502, and after SIGCONT it is back under its name', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const edge = buildEdge({ port: 0, logger: silent, protocol: { heartbeatIntervalMs: 250 } });
    const { port, url } = await edge.listen();
    cleanups.push(() => edge.close(0));
    const agent = spawnCli([
      'http',
      String(backend.port),
      '--server',
      url,
      '--subdomain',
      'frozen',
      '--json',
    ]);
    cleanups.push(() => {
      agent.kill('SIGCONT');
      agent.kill('SIGKILL');
    });
    await agent.waitFor('ready');
    const host = `frozen.localhost:${port}`;
    const inFlight = status(port, host, '/loadtest/delay/3000');
    await until(() => backend.stats.inFlight > 0);
    agent.kill('SIGSTOP');
    const stoppedAt = Date.now();
    expect(await inFlight).toBe(502);
    // Two intervals of silence, plus the tick that notices it.
    expect(Date.now() - stoppedAt).toBeLessThan(3 * 250 + 500);
    const meanwhile = await send({ port, path: '/loadtest/ping', headers: ['Host', host] });
    expect(meanwhile.status).toBe(502);
    expect(meanwhile.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_TUNNEL_OFFLINE');
    agent.kill('SIGCONT');
    await until(() => agent.events.filter((e) => e.event === 'ready').length >= 2);
    expect(await status(port, host, '/loadtest/ping')).toBe(200);
  });

  it('SIGTERM on the edge: in-flight requests finish, new agents are refused, then it exits 0', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const edge = spawnCli(['server', '--port', '0', '--json', '--log-level', 'warn']);
    cleanups.push(() => edge.kill('SIGKILL'));
    const url = String((await edge.waitFor('listening')).url);
    const port = Number(new URL(url).port);
    const tunnel = await connect({ target: backend.port, server: url, subdomain: 'drain' });
    cleanups.push(() => tunnel.close(0));
    const host = `drain.localhost:${port}`;
    const slow = status(port, host, '/loadtest/delay/1000');
    await until(() => backend.stats.inFlight > 0);
    edge.kill('SIGTERM');
    expect(await edge.waitFor('draining')).toMatchObject({ signal: 'SIGTERM', inFlight: 1 });
    await expect(connect({ target: backend.port, server: url, subdomain: 'late' })).rejects.toMatchObject({
      status: 503,
      edgeCode: 'TUNNEL2_ERR_DRAINING',
    });
    expect(await slow).toBe(200);
    expect(await edge.exited).toBe(0);
  });

  it('Ctrl-C on the agent lets its in-flight request finish before it exits 0', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const edge = buildEdge({ port: 0, logger: silent });
    const { port, url } = await edge.listen();
    cleanups.push(() => edge.close(0));
    const agent = spawnCli(['http', String(backend.port), '--server', url, '--subdomain', 'ctrlc', '--json']);
    cleanups.push(() => agent.kill('SIGKILL'));
    await agent.waitFor('ready');
    const slow = status(port, `ctrlc.localhost:${port}`, '/loadtest/delay/800');
    await until(() => backend.stats.inFlight > 0);
    agent.kill('SIGINT');
    expect(await slow).toBe(200);
    expect(await agent.exited).toBe(0);
  });
});
