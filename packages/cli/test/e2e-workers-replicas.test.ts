import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { connect, type Tunnel } from '../src/index.js';
import { type CountingBackend, startCountingBackend } from './support/counting-backend.js';
import { send } from './support/http-client.js';
import { type Spawned, spawnCli } from './support/processes.js';
import { silent } from './support/stack.js';

// `tunnel2 server --workers 2` with two replicas (`--replica`) of one name whose agents sit on different
// workers: each worker is a cluster node with its place in the name's replica set (the primary holds the
// registry), so a request landing on either worker is balanced over both replicas, its own and the other
// worker's. The kernel places each agent's connection by a hash: a replica landing beside the first is
// closed and connected again until one sits on the other worker.

const NAME = 'shop';
const TOKEN = 'token-a';

let edge: Spawned;
let port: number;
let url: string;
const backends: CountingBackend[] = [];
const tunnels: Tunnel[] = [];

beforeAll(async () => {
  edge = spawnCli(['server', '--workers', '2', '--port', '0', '--json', '--token', TOKEN]);
  const listening = await edge.waitFor('listening');
  url = String(listening.url);
  port = Number(new URL(url).port);
  for (const id of ['r0', 'r1']) backends.push(await startCountingBackend(id));
}, 30_000);

afterAll(async () => {
  for (const tunnel of tunnels) await tunnel.close(0);
  if (edge !== undefined && edge.child.exitCode === null) {
    edge.kill('SIGKILL');
    await edge.exited;
  }
  await Promise.all(backends.map((backend) => backend.close()));
});

function replica(backend: CountingBackend): Promise<Tunnel> {
  return connect({
    target: backend.port,
    server: url,
    subdomain: NAME,
    token: TOKEN,
    replica: true,
    inspect: false,
    logger: silent,
  });
}

/** One request on a fresh connection (so on either worker): the backend that answered and its worker. */
async function ask(): Promise<{ answer: string; node: string }> {
  const res = await send({ port, path: '/', headers: ['Host', `${NAME}.localhost`], timeoutMs: 10_000 });
  const answer = res.status === 200 ? res.body.toString() : `${res.status} ${res.headers['x-tunnel2-error']}`;
  return { answer, node: String(res.headers['x-tunnel2-node']) };
}

/** The worker (node id) whose agent is in front of `id`'s backend. */
async function workerOf(id: string): Promise<string> {
  for (let i = 0; i < 200; i++) {
    const { answer, node } = await ask();
    if (answer === id) return node;
  }
  throw new Error(`${id} never answered`);
}

describe('tunnel2 server --workers 2, two replicas on different workers', () => {
  it('serves and balances: requests landing on either worker spread over both replicas', async () => {
    tunnels.push(await replica(backends[0]!));
    const first = await workerOf('r0');
    let second = '';
    for (let attempt = 0; attempt < 16; attempt++) {
      const tunnel = await replica(backends[1]!);
      second = await workerOf('r1');
      if (second !== first) {
        tunnels.push(tunnel);
        break;
      }
      await tunnel.close(0);
    }
    expect(second).not.toBe(first);
    const answers: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < 200) {
          next++;
          answers.push((await ask()).answer);
        }
      }),
    );
    expect(answers.filter((answer) => !/^r\d$/.test(answer))).toEqual([]);
    for (const id of ['r0', 'r1'])
      expect(answers.filter((answer) => answer === id).length).toBeGreaterThanOrEqual(40);
  }, 60_000);

  it('WebSockets reach both replicas, whichever worker takes the upgrade', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 20 && seen.size < 2; i++) {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/`, { headers: { Host: `${NAME}.localhost` } });
      const data = await new Promise<string>((resolve, reject) => {
        ws.once('message', (message) => resolve(String(message)));
        ws.once('error', reject);
      });
      seen.add(data);
      ws.close();
    }
    expect(seen).toEqual(new Set(['r0', 'r1']));
  });

  it('a replica that leaves: the other worker serves everything, from either worker', async () => {
    const leaving = tunnels.shift() as Tunnel;
    await leaving.close(5_000);
    const answers: string[] = [];
    for (let i = 0; i < 40; i++) answers.push((await ask()).answer);
    expect(new Set(answers)).toEqual(new Set(['r1']));
  });
});
