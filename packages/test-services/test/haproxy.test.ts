import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { accepts, startHaproxy } from '../src/index.js';

const servers: Server[] = [];
afterAll(async () => {
  for (const server of servers) server.close();
});

async function node(name: string): Promise<number> {
  const server = createServer((_req, res) => res.end(name));
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as { port: number }).port;
}

async function get(url: string): Promise<{ body: string; server: string | undefined }> {
  const res = await fetch(url);
  return { body: await res.text(), server: res.headers.get('x-lb-server') ?? undefined };
}

describe('startHaproxy', () => {
  it('balances round robin over the nodes, and stop() frees its port', async () => {
    const lb = await startHaproxy([{ port: await node('a') }, { port: await node('b') }]);
    try {
      const bodies = [(await get(lb.url)).body, (await get(lb.url)).body];
      expect(bodies.sort()).toEqual(['a', 'b']);
    } finally {
      await lb.stop();
    }
    expect(await accepts(lb.port)).toBe(false);
  });

  it('with TCP checks, takes a node that refuses connections out and names the answering node', async () => {
    const dead = await node('dead');
    servers.find((s) => (s.address() as { port: number } | null)?.port === dead)?.close();
    const lb = await startHaproxy([{ port: dead }, { port: await node('alive') }], {
      checks: { http: false, interMs: 100, fall: 1, rise: 1 },
      serverHeader: true,
    });
    try {
      // Retried on the other node, or sent there once the check took the dead one out: never a failure.
      for (let i = 0; i < 4; i++) expect(await get(lb.url)).toEqual({ body: 'alive', server: 'n1' });
    } finally {
      await lb.stop();
    }
  });
});
