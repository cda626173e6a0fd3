import { mkdtempSync, rmSync } from 'node:fs';
import { type AddressInfo, connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clusterNodeArgs, freePort, startRedisServer } from '@tunnel2/test-services';
import { afterAll, describe, expect, it } from 'vitest';
import { CLUSTER_SECRET as SECRET } from './support/cluster-harness.js';
import { cli, type Spawned, spawnCli } from './support/processes.js';

// Restart keeps your name across a cluster: two edge processes share a real redis-server; a name released
// by an agent's graceful close on one node is free at once on the other, and a crashed agent's name is
// reserved there for its own key alone, with the reserved wording for anyone else. Agents reach the nodes
// through one address, as behind a load balancer: an agent tells an edge an HMAC of its key keyed to the
// edge's origin (agent-session.ts), so two origins are two edges to it, cluster or not.

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function startNode(redisUrl: string, nodeId: string): Promise<number> {
  const port = await freePort();
  const edge = spawnCli([
    'server',
    '--json',
    '--startup-grace-ms',
    '0',
    ...clusterNodeArgs({ redisUrl, id: nodeId, port, secret: SECRET }),
  ]);
  cleanups.push(async () => {
    edge.kill('SIGKILL');
    await edge.exited;
  });
  await edge.waitFor('listening');
  return port;
}

/** The cluster's one address: each new connection goes to the node last set with `to` (a load balancer). */
async function frontDoor(): Promise<{ port: number; to: (port: number) => void }> {
  let target = 0;
  const server = createServer((client) => {
    const node = connect(target, '127.0.0.1');
    client.on('error', () => node.destroy());
    node.on('error', () => client.destroy());
    client.pipe(node).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return {
    port: (server.address() as AddressInfo).port,
    to: (port) => {
      target = port;
    },
  };
}

/** A user's config directory: agents run with the same one share their agent key. */
function configHome(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tunnel2-cluster-names-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function agent(port: number, home: string): Spawned {
  const run = spawnCli(
    ['http', '1', '--server', `http://127.0.0.1:${port}`, '--subdomain', 'roams', '--json', '--no-inspect'],
    { XDG_CONFIG_HOME: home },
  );
  cleanups.push(async () => {
    run.kill('SIGKILL');
    await run.exited;
  });
  return run;
}

describe('names across a two-node cluster with a real Redis', () => {
  it('a graceful close on one node frees the name on the other at once; a crash keeps it for its own key', async () => {
    const redis = await startRedisServer();
    cleanups.push(() => redis.stop());
    const a = await startNode(redis.url, 'node-a');
    const b = await startNode(redis.url, 'node-b');
    const front = await frontDoor();
    const mine = configHome();
    const theirs = configHome();

    front.to(b);
    const first = agent(front.port, mine);
    await first.waitFor('ready');
    first.kill('SIGINT');
    expect(await first.exited).toBe(0);
    // Another user's agent, on the other node, at once.
    front.to(a);
    const other = agent(front.port, theirs);
    expect((await other.waitFor('ready')).name).toBe('roams');

    other.kill('SIGKILL');
    await other.exited;
    front.to(b);
    const refused = await cli(
      ['http', '1', '--server', `http://127.0.0.1:${front.port}`, '--subdomain', 'roams', '--no-inspect'],
      { XDG_CONFIG_HOME: mine },
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /subdomain "roams" is reserved for the agent that disconnected \d+ s ago, free in \d+ s/,
    );
    // The crashed agent's own key, through the node it did not use.
    const back = agent(front.port, theirs);
    expect((await back.waitFor('ready')).name).toBe('roams');
  });
});
