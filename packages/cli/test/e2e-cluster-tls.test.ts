import { request } from 'node:https';
import { createTestBackend } from '@tunnel2/test-backend';
import {
  freePort,
  type IssuedCertificate,
  makeTestCa,
  startRedisServer,
  type TestCa,
} from '@tunnel2/test-services';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLUSTER_SECRET as SECRET } from './support/cluster-harness.js';
import { type Spawned, spawnCli } from './support/processes.js';

// Two edges serving TLS themselves, sharing a real redis-server: their node links and hops dial each other's
// https:// node URL and verify the certificate (the private CA is trusted through NODE_EXTRA_CA_CERTS, as an
// operator would); an agent connects over wss:// to one, a client asks the other.

let ca: TestCa;
let pair: IssuedCertificate;
const cleanups: (() => Promise<unknown> | unknown)[] = [];

beforeAll(async () => {
  ca = await makeTestCa();
  pair = await ca.issue('edge', ['localhost', 'across.localhost', '127.0.0.1']);
});
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await ca.dispose();
});

function spawned(args: string[], env: NodeJS.ProcessEnv): Spawned {
  const child = spawnCli(args, env);
  cleanups.push(async () => {
    child.kill('SIGKILL');
    await child.exited;
  });
  return child;
}

async function startNode(redisUrl: string, nodeId: string, env: NodeJS.ProcessEnv): Promise<number> {
  const port = await freePort();
  const edge = spawned(
    [
      'server',
      '--json',
      '--startup-grace-ms',
      '0',
      '--port',
      String(port),
      '--registry',
      redisUrl,
      '--node-id',
      nodeId,
      '--node-url',
      `https://127.0.0.1:${port}`,
      '--cluster-secret',
      SECRET,
      '--tls-cert',
      pair.certFile,
      '--tls-key',
      pair.keyFile,
    ],
    env,
  );
  await edge.waitFor('listening');
  return port;
}

function httpsGet(
  port: number,
  host: string,
  path: string,
): Promise<{ status: number; node: unknown; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port,
      path,
      servername: host,
      headers: { host: `${host}:${port}` },
      ca: ca.ca.cert,
      agent: false,
    });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          node: res.headers['x-tunnel2-node'],
          body: Buffer.concat(chunks).toString(),
        }),
      );
    });
    req.end();
  });
}

describe('cluster mode between TLS edges', () => {
  it('forwards a request from one TLS node to the agent on another, over a verified https:// node URL', async () => {
    const redis = await startRedisServer();
    cleanups.push(() => redis.stop());
    const trusted = { NODE_EXTRA_CA_CERTS: ca.ca.file };
    const a = await startNode(redis.url, 'node-a', trusted);
    const b = await startNode(redis.url, 'node-b', trusted);
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const agent = spawned(
      ['http', String(backend.port), '--server', `https://localhost:${b}`, '--subdomain', 'across', '--json'],
      trusted,
    );
    await agent.waitFor('ready');
    const viaA = await httpsGet(a, 'across.localhost', '/loadtest/ping');
    expect(viaA).toEqual({ status: 200, node: 'node-b', body: 'pong' });
  });

  it('does not forward to a node whose certificate it cannot verify', async () => {
    const redis = await startRedisServer();
    cleanups.push(() => redis.stop());
    const trusted = { NODE_EXTRA_CA_CERTS: ca.ca.file };
    // node-a does not trust the CA that signed node-b's certificate.
    const a = await startNode(redis.url, 'node-a', {});
    const b = await startNode(redis.url, 'node-b', trusted);
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const agent = spawned(
      ['http', String(backend.port), '--server', `https://localhost:${b}`, '--subdomain', 'across', '--json'],
      trusted,
    );
    await agent.waitFor('ready');
    const viaA = await httpsGet(a, 'across.localhost', '/loadtest/ping');
    expect(viaA.status).toBe(502);
    expect(viaA.body).toContain('the edge node holding it ("node-b") cannot be reached');
  });
});
