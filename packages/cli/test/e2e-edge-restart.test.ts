import { setTimeout as delay } from 'node:timers/promises';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { afterEach, describe, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { crashedAgent } from './support/crashed-agent.js';
import { type ClientResponse, send } from './support/http-client.js';
import { spawnCli, startEdgeProcess } from './support/processes.js';
import { silent, until } from './support/stack.js';
import { twoNodes } from './support/two-nodes.js';

// Issue #29: right after an edge restart, a name whose agent has not reconnected yet was a 404 for a second
// or so, telling clients and crawlers the URL was gone. Within the startup grace (startupGraceMs) such a
// name waits for its agent (up to reconnectWaitMs) and is otherwise a 503 with Retry-After.

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Answer {
  status: number;
  code: string | undefined;
  retryAfter: string | undefined;
}

/**
 * Requests for `host` in a few sequential loops (a new connection each) until stopped: the answers, and how
 * many got none (the edge was down). Paced so the load stays small on a shared machine.
 */
function hammer(port: number, host: string, loops = 3) {
  const answers: Answer[] = [];
  let unanswered = 0;
  let stopped = false;
  const loop = async (): Promise<void> => {
    while (!stopped) {
      let res: ClientResponse | undefined;
      try {
        res = await send({ port, path: '/loadtest/ping', headers: ['Host', host], timeoutMs: 15_000 });
      } catch {
        unanswered++;
      }
      if (res !== undefined) {
        const code = res.headers['x-tunnel2-error'];
        const retryAfter = res.headers['retry-after'];
        answers.push({
          status: res.status,
          code: typeof code === 'string' ? code : undefined,
          retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined,
        });
      }
      await delay(20);
    }
  };
  const running = Promise.all(Array.from({ length: loops }, loop));
  return {
    answers,
    get unanswered() {
      return unanswered;
    },
    async stop(): Promise<void> {
      stopped = true;
      await running;
    },
  };
}

async function listening(options: Parameters<typeof buildEdge>[0]): Promise<{ edge: Edge; port: number }> {
  const edge = buildEdge({ port: 0, logger: silent, ...options });
  const { port } = await edge.listen();
  cleanups.push(() => edge.close(0));
  return { edge, port };
}

async function tunnel(server: string, subdomain: string, target: number): Promise<Tunnel> {
  const opened = await connect({ target, server, subdomain });
  cleanups.push(() => opened.close(0));
  return opened;
}

describe('an edge restart: names whose agents are reconnecting', () => {
  it('an edge restarted on the same port answers its agent’s name 200 or 503 with Retry-After while the agent reconnects, never 404', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const first = await startEdgeProcess();
    cleanups.push(() => first.edge.kill('SIGKILL'));
    const agent = spawnCli([
      'http',
      String(backend.port),
      '--server',
      first.url,
      '--subdomain',
      'comeback',
      '--json',
    ]);
    cleanups.push(() => {
      agent.kill('SIGCONT');
      agent.kill('SIGKILL');
    });
    await agent.waitFor('ready');
    const port = Number(first.port);
    const load = hammer(port, `comeback.localhost:${port}`);
    cleanups.push(() => load.stop());
    await until(() => load.answers.some((a) => a.status === 200));

    // A deploy: the old process drains and exits. The agent is then held (SIGSTOP) between its reconnect
    // attempts, so the gap between the new process listening and the agent coming back lasts as long as
    // this test needs rather than as long as the agent's backoff happens to make it.
    first.edge.kill('SIGTERM');
    expect(await first.edge.exited).toBe(0);
    agent.kill('SIGSTOP');
    const second = spawnCli([
      'server',
      '--port',
      first.port,
      '--json',
      '--log-level',
      'warn',
      // Short, so that requests in the gap are answered (503) while the agent is still held.
      '--reconnect-wait-ms',
      '1000',
    ]);
    cleanups.push(() => second.kill('SIGKILL'));
    await second.waitFor('listening');
    const fromSecond = load.answers.length;
    await until(() => load.answers.length >= fromSecond + 3, {
      what: 'answers from the restarted edge while the agent is away',
      timeoutMs: 20_000,
    });

    agent.kill('SIGCONT');
    await until(() => agent.events.filter((e) => e.event === 'ready').length >= 2, {
      what: 'the agent back on the restarted edge',
      timeoutMs: 20_000,
    });
    const back = load.answers.length;
    await until(() => load.answers.slice(back).some((a) => a.status === 200));
    await load.stop();

    expect(load.answers.filter((a) => a.status === 404)).toEqual([]);
    // While the agent was away the restarted edge said so: 503, its own code, and when to come back.
    const gap = load.answers.slice(fromSecond, back);
    expect(gap.length).toBeGreaterThanOrEqual(3);
    expect(gap.filter((a) => a.code !== 'TUNNEL2_ERR_TUNNEL_PENDING' && a.status !== 200)).toEqual([]);
    const unexpected = load.answers.filter(
      (a) => !(a.status === 200 || (a.status === 503 && a.retryAfter !== undefined)),
    );
    expect(unexpected).toEqual([]);
    // The agent's name on the restarted edge is the one it had.
    const again = agent.events.filter((e) => e.event === 'ready')[1];
    expect(again?.name).toBe('comeback');
  });

  it('within the startup grace, a request for a name nobody holds waits for its agent and is served once it connects', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const { edge, port } = await listening({ startupGraceMs: 60_000 });
    const waiting = send({ port, path: '/loadtest/ping', headers: ['Host', `late.localhost:${port}`] });
    await until(() => edge.startup.waiting === 1);
    await tunnel(edge.url, 'late', backend.port);
    const res = await waiting;
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe('pong');
    expect(edge.startup.waiting).toBe(0);
  });

  it('within the startup grace, a name still unclaimed after reconnectWaitMs gets 503 TUNNEL_PENDING with Retry-After; a malformed one a prompt 404', async () => {
    const { edge, port } = await listening({ startupGraceMs: 60_000, reconnectWaitMs: 200 });
    const res = await send({ port, path: '/', headers: ['Host', `nobody-yet.localhost:${port}`] });
    expect(res.status).toBe(503);
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_TUNNEL_PENDING');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(edge.startup.waiting).toBe(0);
    // Not a name an agent could hold: nothing to wait for.
    const malformed = await send({ port, path: '/session/-bad-/', headers: ['Host', `127.0.0.1:${port}`] });
    expect(malformed.status).toBe(404);
    expect(malformed.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_UNKNOWN_SESSION');
  });

  it('bounds the waiters per name: past maxWaitingPerSession a request gets its 503 at once, the waiting one is still served', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const { edge, port } = await listening({ startupGraceMs: 60_000, maxWaitingPerSession: 1 });
    const host = ['Host', `crowded.localhost:${port}`];
    const first = send({ port, path: '/loadtest/ping', headers: host });
    await until(() => edge.startup.waiting === 1);
    const second = await send({ port, path: '/loadtest/ping', headers: host });
    expect(second.status).toBe(503);
    expect(second.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_TUNNEL_PENDING');
    expect(second.headers['retry-after']).toBeDefined();
    expect(edge.startup.waiting).toBe(1);
    await tunnel(edge.url, 'crowded', backend.port);
    expect((await first).status).toBe(200);
  });

  it('with the grace off (the library default) an unknown name is a prompt 404', async () => {
    const { port } = await listening({});
    const res = await send({ port, path: '/', headers: ['Host', `nobody.localhost:${port}`] });
    expect(res.status).toBe(404);
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_UNKNOWN_SESSION');
  });

  it('in a cluster, a name no record holds is a prompt 404 even within the grace: the registry outlives a restart', async () => {
    const { a, b, portA } = await twoNodes({ a: { startupGraceMs: 60_000 } });
    cleanups.push(() => b.close(0));
    cleanups.push(() => a.close(0));
    expect(a.startup.active).toBe(true);
    // An agent on its way back still has its record; a scan of names nobody ever held must not make every
    // request a registry lookup every poll period for the whole grace.
    const res = await send({ port: portA, path: '/', headers: ['Host', `never-held.localhost:${portA}`] });
    expect(res.status).toBe(404);
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_UNKNOWN_SESSION');
    expect(a.startup.waiting).toBe(0);
  });

  it('in a cluster, within the grace, a name the registry holds whose agent is connected nowhere is a 503 with Retry-After after the wait, not a 502', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const { a, b, portA } = await twoNodes({ a: { startupGraceMs: 60_000, reconnectWaitMs: 300 } });
    cleanups.push(() => b.close(0));
    cleanups.push(() => a.close(0));
    // A crash: a graceful close would free the name at once (e2e-names-restart.test.ts).
    await crashedAgent({ target: backend.port, server: b.url, subdomain: 'away' });
    // Its name stays reserved in the registry for its owner (reconnectGraceMs), held by no live session.
    await until(() => b.sessions.get('away') === undefined);
    expect(await a.options.registry.lookup('away')).toMatchObject({ connected: false });
    const res = await send({ port: portA, path: '/', headers: ['Host', `away.localhost:${portA}`] });
    expect(res.status).toBe(503);
    expect(res.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_TUNNEL_PENDING');
    expect(res.headers['retry-after']).toBeDefined();
  });
});
