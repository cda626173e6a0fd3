import { Agent } from 'node:http';
import { buildEdge, type Edge } from '@tunnel2/edge';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CountingBackend, startCountingBackend } from './support/counting-backend.js';
import { type Spawned, spawnCli } from './support/processes.js';
import { MAX_OUTSTANDING, type Outcome, rate, requestOnce, steadyLoad } from './support/replica-load.js';
import { silent, until } from './support/stack.js';

// Three real agent processes (`tunnel2 http … --replica`) serve one name, each in front of its own backend,
// under a steady ~500 requests/s: how the requests spread, and what a SIGTERM, a kill -9 and a rolling
// restart of the agents cost. The load is bounded (at most MAX_OUTSTANDING at once, each phase a few s).

const NAME = 'shop';
const TOKEN = 'token-a';
/** Requests started every tick of TICK_MS: 5 per 10 ms is ~500/s when the machine keeps up. */
const BOUND = { timeoutMs: 20_000 };

let edge: Edge;
let port: number;
const backends: CountingBackend[] = [];
/** The agent in front of backends[i]. */
const agents: Spawned[] = [];
const keepAlive = new Agent({ keepAlive: true, maxSockets: MAX_OUTSTANDING });

function startAgent(i: number): Spawned {
  const backend = backends[i]!;
  const agent = spawnCli([
    'http',
    String(backend.port),
    '--json',
    '--no-inspect',
    '--token',
    TOKEN,
    '--server',
    edge.url,
    '--subdomain',
    NAME,
    '--replica',
  ]);
  agents[i] = agent;
  return agent;
}

beforeAll(async () => {
  edge = buildEdge({ port: 0, logger: silent, auth: { tokens: [TOKEN] } });
  ({ port } = await edge.listen());
  for (const id of ['r0', 'r1', 'r2']) backends.push(await startCountingBackend(id));
  for (let i = 0; i < 3; i++) await startAgent(i).waitFor('ready');
}, 30_000);

afterAll(async () => {
  for (const agent of agents) agent?.kill('SIGKILL');
  await Promise.all(agents.map((agent) => agent?.exited));
  keepAlive.destroy();
  await edge?.close(0);
  await Promise.all(backends.map((backend) => backend.close()));
});

function request(): Promise<Outcome> {
  return requestOnce(port, `${NAME}.localhost`, keepAlive);
}

async function allThreeLive(): Promise<void> {
  await until(() => edge.sessions.replicas(NAME).filter((entry) => !entry.session.draining).length === 3, {
    what: 'three live replicas',
    ...BOUND,
  });
}

describe('three agent processes on one name under ~500 requests/s', () => {
  it('each `ready` event (--json) says how many agents served the name when it connected', async () => {
    const said = await Promise.all(agents.map(async (agent) => (await agent.waitFor('ready')).replicas));
    expect(said).toEqual([1, 2, 3]);
  });

  it('the requests spread over all three: each backend serves at least 20 %', async () => {
    await allThreeLive();
    const before = backends.map((backend) => backend.requests);
    const load = steadyLoad(request, BOUND);
    await load.more(1_000);
    const outcomes = await load.stop();
    const served = backends.map((backend, i) => backend.requests - (before[i] ?? 0));
    const total = served.reduce((a, b) => a + b, 0);
    console.info(`spread: ${outcomes.length} requests at ~${rate(outcomes)}/s, served ${served.join('/')}`);
    expect(outcomes.filter((o) => !o.ok)).toEqual([]);
    for (const count of served) expect(count / total).toBeGreaterThanOrEqual(0.2);
  }, 60_000);

  it('one agent SIGTERMed: not one request fails; the others take the new ones', async () => {
    await allThreeLive();
    const load = steadyLoad(request, BOUND);
    await load.more(300);
    const leaving = agents[0]!;
    leaving.kill('SIGTERM');
    expect(await leaving.exited).toBe(0);
    const goneAt = performance.now();
    await load.more(500);
    const outcomes = await load.stop();
    console.info(`SIGTERM: ${outcomes.length} requests at ~${rate(outcomes)}/s`);
    expect(outcomes.filter((o) => !o.ok)).toEqual([]);
    expect(outcomes.filter((o) => o.startedAt > goneAt && o.answer === 'r0')).toEqual([]);
    await startAgent(0).waitFor('ready');
  }, 60_000);

  it('one agent killed with SIGKILL: only requests in flight on it fail, each with a clean 502', async () => {
    await allThreeLive();
    const load = steadyLoad(request, BOUND);
    await load.more(300);
    const killedAt = performance.now();
    agents[1]!.kill('SIGKILL');
    await agents[1]!.exited;
    await until(() => edge.sessions.replicas(NAME).length === 2, { what: 'the edge sees it gone', ...BOUND });
    const goneAt = performance.now();
    await load.more(500);
    const outcomes = await load.stop();
    const failed = outcomes.filter((o) => !o.ok);
    console.info(
      `SIGKILL: ${outcomes.length} requests at ~${rate(outcomes)}/s, ${failed.length} failed ` +
        `(${[...new Set(failed.map((o) => o.answer))].join(', ')}); the edge saw it gone after ` +
        `${Math.round(goneAt - killedAt)} ms`,
    );
    for (const o of failed) {
      expect(o.answer).toMatch(/^502 TUNNEL2_ERR_/);
      // In flight on the dead agent: started before the edge saw it gone, still running when it died.
      expect(o.startedAt).toBeLessThanOrEqual(goneAt);
      expect(o.endedAt).toBeGreaterThanOrEqual(killedAt);
    }
    // New requests go to the two others.
    expect(outcomes.filter((o) => o.startedAt > goneAt && !o.ok)).toEqual([]);
    expect(outcomes.filter((o) => o.startedAt > goneAt && o.answer === 'r1')).toEqual([]);
    await startAgent(1).waitFor('ready');
  }, 60_000);

  it('a rolling restart of all three agents (SIGTERM, start again, next) loses nothing', async () => {
    await allThreeLive();
    const load = steadyLoad(request, BOUND);
    await load.more(200);
    for (let i = 0; i < 3; i++) {
      const old = agents[i]!;
      old.kill('SIGTERM');
      expect(await old.exited).toBe(0);
      await startAgent(i).waitFor('ready');
      await load.more(200);
    }
    const outcomes = await load.stop();
    console.info(`rolling restart: ${outcomes.length} requests at ~${rate(outcomes)}/s`);
    expect(outcomes.filter((o) => !o.ok)).toEqual([]);
    expect(new Set(outcomes.slice(-100).map((o) => o.answer))).toEqual(new Set(['r0', 'r1', 'r2']));
  }, 90_000);
});
