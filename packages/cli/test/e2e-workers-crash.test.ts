import { createTestBackend } from '@tunnel2/test-backend';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect, type Tunnel } from '../src/index.js';
import { send } from './support/http-client.js';
import { type Spawned, spawnCli } from './support/processes.js';
import { silent, until } from './support/stack.js';

// kill -9 of one worker of `tunnel2 server --workers 2` under a steady ~200 requests/s: the primary
// restarts it, requests for names held by the other worker keep being served, and the dead worker's agents
// (they reconnect on their own, to whichever worker takes their connection) are served again within 3 s.

type Backend = Awaited<ReturnType<typeof createTestBackend>>;

/** Requests per second, each on its own connection (so node:cluster spreads them over both workers). */
const RATE = 200;
/** The load before the kill, and how long it goes on after the victim's names are served again. */
const BEFORE_MS = 1_000;
const AFTER_MS = 1_000;
/** What the issue asks: the dead worker's agents are back within this. */
const BACK_WITHIN_MS = 3_000;

let edge: Spawned;
let port: number;
let backend: Backend;
const tunnels: Tunnel[] = [];

interface Outcome {
  name: string;
  sentAt: number;
  doneAt: number;
  status: number | string;
  holder: string | undefined;
}

function workersOf(): Map<number, { pid: number; node: string }> {
  const workers = new Map<number, { pid: number; node: string }>();
  for (const line of edge.stderr().split('\n')) {
    if (!line.includes('"edge worker listening"')) continue;
    const entry = JSON.parse(line) as { worker: number; workerPid: number; node: string };
    workers.set(entry.worker, { pid: entry.workerPid, node: entry.node });
  }
  return workers;
}

async function holderOf(name: string): Promise<string> {
  const res = await send({ port, path: '/loadtest/ping', headers: ['Host', `${name}.localhost`] });
  expect(res.status).toBe(200);
  return String(res.headers['x-tunnel2-node']);
}

beforeAll(async () => {
  edge = spawnCli(['server', '--workers', '2', '--port', '0', '--json', '--log-level', 'info']);
  port = Number(new URL(String((await edge.waitFor('listening')).url)).port);
  backend = await createTestBackend();
  for (let i = 0; i < 4; i++)
    tunnels.push(
      await connect({
        target: backend.port,
        server: `http://127.0.0.1:${port}`,
        subdomain: `crash-${i}`,
        logger: silent,
      }),
    );
}, 60_000);

afterAll(async () => {
  for (const tunnel of tunnels) await tunnel.close(0);
  if (edge !== undefined && edge.child.exitCode === null) {
    edge.kill('SIGKILL');
    await edge.exited;
  }
  await backend?.close();
});

it('restarts a worker killed with SIGKILL under load; the others keep serving; its agents are back within 3 s', async () => {
  const names = tunnels.map((_, i) => `crash-${i}`);
  const holders = new Map<string, string>();
  for (const name of names) holders.set(name, await holderOf(name));
  // node:cluster spreads the agents' connections in turn; should they all sit on one worker, add agents.
  while (new Set(holders.values()).size < 2 && names.length < 8) {
    const name = `crash-${names.length}`;
    tunnels.push(
      await connect({
        target: backend.port,
        server: `http://127.0.0.1:${port}`,
        subdomain: name,
        logger: silent,
      }),
    );
    names.push(name);
    holders.set(name, await holderOf(name));
  }
  const workers = workersOf();
  // The victim: the worker holding crash-0's agent. The others' names must keep being served.
  const victimNode = holders.get('crash-0') ?? '';
  const [victimIndex, victim] = [...workers].find(([, w]) => w.node === victimNode) ?? [];
  expect(victim).toBeDefined();
  const victimNames = names.filter((n) => holders.get(n) === victimNode);
  const survivorNames = names.filter((n) => holders.get(n) !== victimNode);
  expect(survivorNames.length).toBeGreaterThan(0);

  const outcomes: Outcome[] = [];
  const start = performance.now();
  let killedAt = Number.POSITIVE_INFINITY;
  let stopAt = Number.POSITIVE_INFINITY;
  let sent = 0;
  const inFlight = new Set<Promise<void>>();
  const load = (async () => {
    while (performance.now() < stopAt) {
      const due = Math.floor(((performance.now() - start) * RATE) / 1_000);
      // Bounded: a stall of the edge does not pile up connections without end.
      while (sent < due && inFlight.size < RATE) {
        const name = names[sent % names.length] ?? 'crash-0';
        sent++;
        const sentAt = performance.now();
        const request = send({
          port,
          path: '/loadtest/ping',
          headers: ['Host', `${name}.localhost`],
          timeoutMs: 5_000,
        })
          .then(
            (res) => {
              outcomes.push({
                name,
                sentAt,
                doneAt: performance.now(),
                status: res.status,
                holder: res.headers['x-tunnel2-node'] as string,
              });
            },
            (err: NodeJS.ErrnoException) => {
              outcomes.push({
                name,
                sentAt,
                doneAt: performance.now(),
                status: err.code ?? err.message,
                holder: undefined,
              });
            },
          )
          .finally(() => inFlight.delete(request));
        inFlight.add(request);
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await Promise.all(inFlight);
  })();

  await until(() => performance.now() - start >= BEFORE_MS);
  process.kill(victim?.pid ?? 0, 'SIGKILL');
  killedAt = performance.now();
  // From when the primary has seen the exit (it logs it), node:cluster hands no connection to the dead worker.
  await until(() => edge.stderr().includes('edge worker died'), { what: 'the exit seen', timeoutMs: 5_000 });
  const exitSeenAt = performance.now();
  // The primary restarts it: a new process, the same worker index.
  await until(
    () => {
      const now = workersOf().get(victimIndex ?? -1);
      return now !== undefined && now.pid !== victim?.pid;
    },
    { what: 'the worker restarted', timeoutMs: 5_000 },
  );
  // The victim's names are served again (its agents reconnected), then the load runs a while longer.
  const backAt = (name: string): number | undefined =>
    outcomes.find((o) => o.name === name && o.sentAt > killedAt && o.status === 200)?.sentAt;
  await until(() => victimNames.every((name) => backAt(name) !== undefined), {
    what: "the dead worker's agents served again",
    timeoutMs: 5_000,
  });
  stopAt = performance.now() + AFTER_MS;
  await load;

  for (const name of victimNames)
    expect((backAt(name) ?? Number.POSITIVE_INFINITY) - killedAt).toBeLessThan(BACK_WITHIN_MS);
  // Whatever finished before the kill was served.
  expect(outcomes.filter((o) => o.doneAt < killedAt && o.status !== 200)).toEqual([]);
  // The only failures are requests in flight at the kill, or sent before the primary saw the worker's exit:
  // a connection the dead worker had taken (or that sat in its SO_REUSEPORT accept queue) is reset
  // (ECONNRESET). Without SO_REUSEPORT (not Linux), one node:cluster's round-robin was handing it just then
  // stays open, unanswered, in the primary (Node's RoundRobinHandle never closes a handoff the worker did
  // not acknowledge): the client's timeout ends it. With it, none is left hanging.
  const failed = outcomes.filter((o) => o.status !== 200);
  expect(failed.length).toBeLessThanOrEqual(3);
  for (const o of failed) {
    expect(o.sentAt).toBeLessThan(exitSeenAt);
    expect(o.doneAt).toBeGreaterThan(killedAt);
    if (process.platform === 'linux') expect(String(o.status)).not.toMatch(/no complete answer/);
  }
  // Everything sent from then on was served, for the survivors' names and, once back, the victim's.
  expect(outcomes.filter((o) => o.sentAt > exitSeenAt && o.status !== 200)).toEqual([]);
  expect(sent).toBeGreaterThan(RATE);
}, 60_000);
