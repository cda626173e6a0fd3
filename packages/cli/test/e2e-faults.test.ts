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

  it('a frozen agent (SIGSTOP) is declared gone within 10 s with the default settings, with no request to notice it', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    // The edge's defaults: it announces a 3 s heartbeat, the agent (the protocol's default) 10 s, the shorter
    // one holds: a silent agent is gone after two silent intervals, 6–9 s (20–30 s at 10 s).
    const edge = buildEdge({ port: 0, logger: silent });
    const { url } = await edge.listen();
    cleanups.push(() => edge.close(0));
    const agent = spawnCli(['http', String(backend.port), '--server', url, '--subdomain', 'lid', '--json']);
    cleanups.push(() => {
      agent.kill('SIGCONT');
      agent.kill('SIGKILL');
    });
    await agent.waitFor('ready');
    expect(edge.sessions.get('lid')).toBeDefined();
    agent.kill('SIGSTOP');
    const stoppedAt = performance.now();
    // Generous for a loaded machine: the verdict comes 6–9 s after the agent's last message.
    await until(() => edge.sessions.get('lid') === undefined, {
      what: 'the frozen session to be declared gone',
      timeoutMs: 15_000,
    });
    expect(performance.now() - stoppedAt).toBeLessThan(15_000);
    agent.kill('SIGCONT');
    await until(() => agent.events.filter((e) => e.event === 'ready').length >= 2);
  });

  it('the first request to a frozen agent gets its 502 in seconds: the edge pings a quiet agent it sends a request to', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    // A long heartbeat on the edge: the agent's 10 s is the agreed interval, so the heartbeat's verdict
    // comes 20–30 s after the freeze. Only the probe (probeTimeoutMs, default 2 s) answers sooner.
    const edge = buildEdge({ port: 0, logger: silent, protocol: { heartbeatIntervalMs: 60_000 } });
    const { port, url } = await edge.listen();
    cleanups.push(() => edge.close(0));
    const agent = spawnCli([
      'http',
      String(backend.port),
      '--server',
      url,
      '--subdomain',
      'asleep',
      '--json',
    ]);
    cleanups.push(() => {
      agent.kill('SIGCONT');
      agent.kill('SIGKILL');
    });
    await agent.waitFor('ready');
    const host = ['Host', `asleep.localhost:${port}`];
    expect((await send({ port, path: '/loadtest/ping', headers: host })).status).toBe(200);
    agent.kill('SIGSTOP');
    const stoppedAt = performance.now();
    const first = await send({ port, path: '/loadtest/ping', headers: host });
    const answeredAfterMs = performance.now() - stoppedAt;
    expect(first.status).toBe(502);
    expect(first.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_TUNNEL_OFFLINE');
    // Far below the heartbeat's 20 s at the least: a quiet second, then 2 s without an answer to the PING.
    expect(answeredAfterMs).toBeLessThan(15_000);
    expect(edge.sessions.get('asleep')).toBeUndefined();
    agent.kill('SIGCONT');
    await until(() => agent.events.filter((e) => e.event === 'ready').length >= 2);
    expect((await send({ port, path: '/loadtest/ping', headers: host })).status).toBe(200);
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
