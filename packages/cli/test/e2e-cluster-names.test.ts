import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clusterNodeArgs, freePort, startRedisServer } from '@tunnel2/test-services';
import { afterAll, describe, expect, it } from 'vitest';
import { CLUSTER_SECRET as SECRET } from './support/cluster-harness.js';
import { cli, type Spawned, spawnCli } from './support/processes.js';

// Restart keeps your name across a cluster: two edge processes share a real redis-server; a name released
// by an agent's graceful close on one node is free at once on the other, and a crashed agent's name is
// reserved there for its own key alone, with the reserved wording for anyone else.

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
    const mine = configHome();
    const theirs = configHome();

    const first = agent(b, mine);
    await first.waitFor('ready');
    first.kill('SIGINT');
    expect(await first.exited).toBe(0);
    // Another user's agent, on the other node, at once.
    const other = agent(a, theirs);
    expect((await other.waitFor('ready')).name).toBe('roams');

    other.kill('SIGKILL');
    await other.exited;
    const refused = await cli(
      ['http', '1', '--server', `http://127.0.0.1:${b}`, '--subdomain', 'roams', '--no-inspect'],
      { XDG_CONFIG_HOME: mine },
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /subdomain "roams" is reserved for the agent that disconnected \d+ s ago, free in \d+ s/,
    );
    // The crashed agent's own key, through the node it did not use.
    const back = agent(b, theirs);
    expect((await back.waitFor('ready')).name).toBe('roams');
  });
});
