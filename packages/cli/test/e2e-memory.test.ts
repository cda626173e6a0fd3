import { request } from 'node:http';
import { createTestBackend } from '@tunnel2/test-backend';
import { afterAll, expect, it } from 'vitest';
import { peakRss, readInBursts, type Spawned, spawnCli } from './support/processes.js';

const cleanups: (() => unknown)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const GiB = 1024 * 1024 * 1024;
const MB = 1_000_000;

it('a 1 GiB download read slowly keeps edge and agent RSS under 150 MB', async () => {
  const backend = await createTestBackend();
  cleanups.push(() => backend.close());
  // Edge and agent run as their own processes so their memory is measured alone.
  const edge: Spawned = spawnCli(['server', '--port', '0', '--json', '--log-level', 'warn']);
  cleanups.push(() => edge.kill('SIGKILL'));
  const listening = await edge.waitFor('listening');
  const edgeUrl = String(listening.url);
  const edgePort = Number(new URL(edgeUrl).port);
  const agent: Spawned = spawnCli([
    'http',
    String(backend.port),
    '--server',
    edgeUrl,
    '--subdomain',
    'bulk',
    '--json',
  ]);
  cleanups.push(() => agent.kill('SIGKILL'));
  await agent.waitFor('ready');

  const received = await new Promise<number>((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port: edgePort,
      path: `/bytes/${GiB}`,
      headers: { host: `bulk.localhost:${edgePort}` },
      agent: false,
    });
    req.on('error', reject);
    req.on('response', (res) => {
      readInBursts(res, () => res.complete).then(resolve, reject);
    });
    req.end();
  });
  expect(received).toBe(GiB);
  const edgePeak = peakRss(edge.child.pid!);
  const agentPeak = peakRss(agent.child.pid!);
  console.log(
    `peak RSS after 1 GiB: edge ${(edgePeak / MB).toFixed(1)} MB, agent ${(agentPeak / MB).toFixed(1)} MB`,
  );
  expect(edgePeak).toBeLessThan(150 * MB);
  expect(agentPeak).toBeLessThan(150 * MB);
}, 180_000);
