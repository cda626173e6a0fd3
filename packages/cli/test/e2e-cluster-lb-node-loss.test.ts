import { createTestBackend } from '@tunnel2/test-backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, type ClusterNode, startCluster } from './support/cluster-harness.js';
import { send } from './support/http-client.js';
import { type Spawned, spawnCli } from './support/processes.js';

// Node loss under a real HAProxy (health checks on /readyz, retries on refused or unanswered
// connections): the node holding an agent is killed with SIGKILL, then all three nodes are restarted one
// after another with SIGTERM (drain), each under a steady stream of public requests through HAProxy.

/** Bound on every "until" loop below. */
const DEADLINE_MS = 20_000;
/** The path every load request asks: a short delay, so some requests are always in flight. */
const DELAY_MS = 20;
const EXPECTED_BODY = JSON.stringify({ delayedMs: DELAY_MS });
/** A request with no whole answer by then counts as lost (HAProxy itself would wait 60 s). */
const ANSWER_TIMEOUT_MS = 15_000;

type Backend = Awaited<ReturnType<typeof createTestBackend>>;

let cluster: Cluster;
let backend: Backend;
let agent: Spawned;

beforeAll(async () => {
  cluster = await startCluster({ nodes: 3, healthChecks: true, edgeArgs: ['--token', 'token-a'] });
  backend = await createTestBackend();
  agent = spawnCli([
    'http',
    String(backend.port),
    '--json',
    '--token',
    'token-a',
    '--server',
    cluster.lbUrl,
    '--subdomain',
    'survivor',
  ]);
  agent.child.stdout?.resume();
  await agent.waitFor('ready');
}, 30_000);

afterAll(async () => {
  if (agent !== undefined) {
    agent.kill('SIGKILL');
    await agent.exited;
  }
  await cluster?.stop();
  await backend?.close();
});

function sessionName(): string {
  return 'survivor';
}

interface Outcome {
  startedAt: number;
  endedAt: number;
  /** ok: 200 with the whole body; short: 200 with a wrong body; refused: another status; aborted: no answer. */
  kind: 'ok' | 'short' | 'refused' | 'aborted';
  detail: string;
}

/** One public request through HAProxy. */
async function request(name: string): Promise<Outcome> {
  const startedAt = Date.now();
  try {
    const res = await send({
      port: cluster.lbPort,
      path: `/loadtest/delay/${DELAY_MS}`,
      headers: ['Host', `${name}.localhost`],
      timeoutMs: ANSWER_TIMEOUT_MS,
    });
    const body = res.body.toString();
    const kind = res.status !== 200 ? 'refused' : body === EXPECTED_BODY ? 'ok' : 'short';
    return {
      startedAt,
      endedAt: Date.now(),
      kind,
      detail: `${res.status} ${res.headers['x-tunnel2-error'] ?? ''} ${body.slice(0, 120)}`,
    };
  } catch (err) {
    return { startedAt, endedAt: Date.now(), kind: 'aborted', detail: String(err) };
  }
}

/** A steady load: one request every `periodMs`, at most `maxOutstanding` at a time, until `stop()`. */
function steadyLoad(name: string, periodMs: number, maxOutstanding: number) {
  const outcomes: Outcome[] = [];
  const pending = new Set<Promise<void>>();
  let skipped = 0;
  const timer = setInterval(() => {
    if (pending.size >= maxOutstanding) {
      skipped++;
      return;
    }
    const p = request(name).then((o) => {
      outcomes.push(o);
      pending.delete(p);
    });
    pending.add(p);
  }, periodMs);
  return {
    outcomes,
    get skipped() {
      return skipped;
    },
    async stop(): Promise<Outcome[]> {
      clearInterval(timer);
      await Promise.all([...pending]);
      return outcomes;
    },
  };
}

async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + DEADLINE_MS;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** The node holding the session, as a request through HAProxy reports it. */
async function holder(name: string): Promise<ClusterNode> {
  const outcome = await send({
    port: cluster.lbPort,
    path: '/loadtest/ping',
    headers: ['Host', `${name}.localhost`],
    timeoutMs: ANSWER_TIMEOUT_MS,
  });
  expect(outcome.status).toBe(200);
  const node = cluster.nodes.find((n) => n.id === outcome.headers['x-tunnel2-node']);
  expect(node).toBeDefined();
  return node!;
}

/** Waits until HAProxy sends requests to `node` again (its health check passed). */
async function backInRotation(node: ClusterNode, name: string): Promise<void> {
  const lbName = `n${cluster.nodes.indexOf(node)}`;
  await until(`${node.id} back in HAProxy's rotation`, async () => {
    const res = await send({
      port: cluster.lbPort,
      path: '/loadtest/ping',
      headers: ['Host', `${name}.localhost`],
      timeoutMs: ANSWER_TIMEOUT_MS,
    });
    return res.headers['x-lb-server'] === lbName;
  });
}

describe('kill -9 of the node holding a session', () => {
  it('the agent is back on another node within 3 s; only requests in flight on the dead node fail, as aborted', async () => {
    const name = sessionName();
    const dead = await holder(name);
    const load = steadyLoad(name, 5, 100);
    await until('some load served', () => load.outcomes.filter((o) => o.kind === 'ok').length >= 50);
    const readyBefore = agent.events.filter((e) => e.event === 'ready').length;
    const killedAt = Date.now();
    await dead.kill();
    await until(
      'the agent ready again',
      () => agent.events.filter((e) => e.event === 'ready').length > readyBefore,
    );
    const backAfterMs = Date.now() - killedAt;
    const killedDone = Date.now();
    await until(
      'load served after the return',
      () => load.outcomes.filter((o) => o.kind === 'ok' && o.startedAt > killedDone).length >= 100,
    );
    const outcomes = await load.stop();
    const failed = outcomes.filter((o) => o.kind !== 'ok');
    console.info(
      `kill -9: agent ready again after ${backAfterMs} ms; ${outcomes.length} requests, ${failed.length} failed ` +
        `(${failed.map((o) => `${o.kind}: ${o.detail}`).join('; ')}); ${load.skipped} ticks skipped`,
    );
    expect(backAfterMs).toBeLessThan(3_000);
    expect((await holder(name)).id).not.toBe(dead.id);
    // Never a silently short answer; a failure is only a request that was in flight when the node died.
    expect(outcomes.filter((o) => o.kind === 'short')).toEqual([]);
    for (const o of failed) {
      expect(o.kind).toBe('aborted');
      expect(o.startedAt).toBeLessThanOrEqual(killedAt);
      expect(o.endedAt).toBeGreaterThanOrEqual(killedAt);
    }
    await dead.start();
    await backInRotation(dead, name);
  }, 60_000);
});

describe('rolling restart of all three nodes (SIGTERM, drain, start again)', () => {
  it('loses no request under ~200 RPS through HAProxy', async () => {
    const name = sessionName();
    const load = steadyLoad(name, 5, 200);
    const movedTo: string[] = [];
    // Each step is logged as it ends, so a step that hangs is named even when the test times out.
    const began = Date.now();
    const step = async (what: string, action: () => Promise<unknown>) => {
      await action();
      console.info(`rolling restart: ${what} at ${Date.now() - began} ms`);
    };
    for (const node of cluster.nodes) {
      await step(`${node.id} drained and exited`, () => node.terminate());
      await step(`${node.id} listening`, () => node.start());
      await step(`${node.id} in rotation`, () => backInRotation(node, name));
      movedTo.push((await holder(name)).id);
    }
    const outcomes = await load.stop();
    const failed = outcomes.filter((o) => o.kind !== 'ok');
    console.info(
      `rolling restart: ${outcomes.length} requests, ${failed.length} failed ` +
        `(${failed.map((o) => `${o.kind}: ${o.detail}`).join('; ')}); ${load.skipped} ticks skipped; ` +
        `holder after each restart: ${movedTo.join(', ')}`,
    );
    expect(failed).toEqual([]);
    expect(outcomes.length).toBeGreaterThan(200);
    expect(agent.child.exitCode).toBeNull();
  }, 60_000);
});
