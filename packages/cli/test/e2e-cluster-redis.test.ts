import { createTestBackend } from '@tunnel2/test-backend';
import { clusterNodeArgs, freePort, startRedisCluster, startRedisServer } from '@tunnel2/test-services';
import { afterAll, describe, expect, it } from 'vitest';
import { CLUSTER_SECRET as SECRET } from './support/cluster-harness.js';
import { send } from './support/http-client.js';
import { cli, type Spawned, spawnCli } from './support/processes.js';

// `tunnel2 server --registry redis://...` as an operator runs it: two edge processes share a real
// redis-server; an agent connects to one, a client asks the other.

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function startNode(redisUrl: string, nodeId: string): Promise<{ edge: Spawned; port: number }> {
  const port = await freePort();
  const edge = spawnCli([
    'server',
    '--json',
    // A name no node holds is a prompt 404 here; the startup grace is e2e-edge-restart.test.ts's.
    '--startup-grace-ms',
    '0',
    ...clusterNodeArgs({ redisUrl, id: nodeId, port, secret: SECRET }),
  ]);
  cleanups.push(async () => {
    edge.kill('SIGKILL');
    await edge.exited;
  });
  await edge.waitFor('listening');
  return { edge, port };
}

/** Two nodes on `registryUrl`, an agent on node-b, and a request through node-a answered by node-b. */
async function acrossNodes(registryUrl: string, subdomain: string): Promise<{ a: number; b: number }> {
  const backend = await createTestBackend();
  cleanups.push(() => backend.close());
  const a = await startNode(registryUrl, 'node-a');
  const b = await startNode(registryUrl, 'node-b');
  const agent = spawnCli([
    'http',
    String(backend.port),
    '--server',
    `http://127.0.0.1:${b.port}`,
    '--subdomain',
    subdomain,
    '--json',
  ]);
  cleanups.push(async () => {
    agent.kill('SIGKILL');
    await agent.exited;
  });
  await agent.waitFor('ready');

  const viaA = await send({
    port: a.port,
    path: '/loadtest/ping',
    headers: ['Host', `${subdomain}.localhost:${a.port}`],
  });
  expect(viaA.status).toBe(200);
  expect(viaA.body.toString()).toBe('pong');
  expect(viaA.headers['x-tunnel2-node']).toBe('node-b');
  return { a: a.port, b: b.port };
}

describe('cluster mode with a real Redis', () => {
  it('a request on one node reaches the agent connected to another, through the shared registry', async () => {
    const redis = await startRedisServer();
    cleanups.push(() => redis.stop());
    const ports = await acrossNodes(redis.url, 'across');
    const a = { port: ports.a };
    const b = { port: ports.b };
    const viaB = await send({
      port: b.port,
      path: '/loadtest/ping',
      headers: ['Host', `across.localhost:${b.port}`],
    });
    expect(viaB.status).toBe(200);
    expect(viaB.headers['x-tunnel2-node']).toBe('node-b');
    // A name no node holds is a 404 on either node, not a forward.
    const unknown = await send({ port: a.port, path: '/', headers: ['Host', `nobody.localhost:${a.port}`] });
    expect(unknown.status).toBe(404);
    expect(unknown.headers['x-tunnel2-error']).toBe('TUNNEL2_ERR_UNKNOWN_SESSION');
  });

  it('runs the same on a Redis Cluster (--registry redis+cluster://seed,seed,seed)', async () => {
    const cluster = await startRedisCluster();
    cleanups.push(() => cluster.stop());
    await acrossNodes(cluster.url, 'sharded');
  });

  it('refuses to start without what a shared registry needs, or when Redis cannot be reached, in one line', async () => {
    const missing = await cli(['server', '--port', '0', '--registry', 'redis://127.0.0.1:6379']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('needs nodeUrl (--node-url) and clusterSecret (--cluster-secret)');

    const memory = await cli([
      'server',
      '--port',
      '0',
      '--node-url',
      'http://127.0.0.1:1',
      '--cluster-secret',
      SECRET,
    ]);
    expect(memory.code).toBe(1);
    expect(memory.stderr).toContain('needs a registry the nodes share');

    const dead = await freePort();
    const unreachable = await cli([
      'server',
      '--port',
      '0',
      '--registry',
      `redis://:hunter2secret@127.0.0.1:${dead}`,
      '--node-url',
      'http://127.0.0.1:1',
      '--cluster-secret',
      SECRET,
    ]);
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toContain('cannot use the session registry');
    expect(unreachable.stderr).not.toContain('hunter2secret');
    expect(unreachable.stderr.trim().split('\n')).toHaveLength(1);

    const printed = await cli([
      'server',
      '--registry',
      'redis://:hunter2secret@redis.internal:6379/0',
      '--node-url',
      'http://10.0.0.7:8080',
      '--cluster-secret',
      SECRET,
      '--print-config',
    ]);
    expect(printed.code).toBe(0);
    const config = JSON.parse(printed.stdout) as Record<string, unknown>;
    expect(config.registry).toBe('redis://:redacted@redis.internal:6379/0');
    expect(config.clusterSecret).toBe('<redacted>');
    expect(printed.stdout).not.toContain('hunter2secret');

    const bad = await cli(['server', '--registry', 'postgres://db:5432']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain(
      'must be memory, or a redis://, rediss://, redis+cluster:// or rediss+cluster:// URL',
    );
  });
});
