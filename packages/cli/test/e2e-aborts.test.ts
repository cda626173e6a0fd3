import { request } from 'node:http';
import { buildEdge } from '@tunnel2/edge';
import { createTestBackend } from '@tunnel2/test-backend';
import { afterEach, describe, expect, it } from 'vitest';
import { type Spawned, spawnCli } from './support/processes.js';
import { type Stack, silent, startStack, until } from './support/stack.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Resolves when the backend sees a request to `path` end before its response finished. */
function backendAbort(
  stack: { backend: { server: import('node:http').Server } },
  path: string,
): Promise<void> {
  return new Promise((resolve) => {
    stack.backend.server.on('request', (req, res) => {
      if (!req.url?.startsWith(path)) return;
      res.on('close', () => {
        if (!res.writableFinished) resolve();
      });
    });
  });
}

/** Starts a download and resolves with how it ended once `bytes` have arrived and `then` ran. */
function download(port: number, host: string, path: string, afterBytes: number, then: () => void) {
  return new Promise<{ received: number; outcome: 'complete' | 'aborted' }>((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { host }, agent: false });
    let received = 0;
    let fired = false;
    req.on('error', () => resolve({ received, outcome: 'aborted' }));
    req.on('response', (res) => {
      res.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (!fired && received >= afterBytes) {
          fired = true;
          then();
        }
      });
      res.on('error', () => resolve({ received, outcome: 'aborted' }));
      res.on('aborted', () => resolve({ received, outcome: 'aborted' }));
      res.on('end', () => resolve({ received, outcome: res.complete ? 'complete' : 'aborted' }));
    });
    req.end();
  });
}

describe('aborts propagate through the tunnel', () => {
  it('a client that aborts mid-download makes the backend see its request aborted', async () => {
    const stack: Stack = await startStack({ name: 'abort-client' });
    cleanups.push(() => stack.close());
    const aborted = backendAbort(stack, '/bytes/');
    const req = request({
      host: '127.0.0.1',
      port: stack.port,
      path: `/bytes/${1024 * 1024 * 1024}`,
      headers: { host: stack.host },
      agent: false,
    });
    req.on('error', () => {});
    req.on('response', (res) => {
      let received = 0;
      res.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received > 1024 * 1024) req.destroy();
      });
    });
    req.end();
    await aborted;
  });

  it('an agent killed mid-download gives the client an aborted response, not a complete one', async () => {
    const backend = await createTestBackend();
    cleanups.push(() => backend.close());
    const edge = buildEdge({ port: 0, logger: silent });
    const { port, url } = await edge.listen();
    cleanups.push(() => edge.close(0));
    const agent: Spawned = spawnCli([
      'http',
      String(backend.port),
      '--server',
      url,
      '--subdomain',
      'killed',
      '--json',
    ]);
    cleanups.push(() => agent.kill('SIGKILL'));
    await agent.waitFor('ready');
    const size = 512 * 1024 * 1024;
    const result = await download(port, `killed.localhost:${port}`, `/bytes/${size}`, 4 * 1024 * 1024, () =>
      agent.kill('SIGKILL'),
    );
    expect(result.outcome).toBe('aborted');
    expect(result.received).toBeLessThan(size);
  });

  it('a backend that dies mid-response gives the client an aborted response', async () => {
    const stack: Stack = await startStack({ name: 'abort-backend' });
    cleanups.push(() => stack.close());
    const result = await download(stack.port, stack.host, '/abort-after/100000', 1, () => {});
    expect(result.outcome).toBe('aborted');
  });
});

describe('aborts at scale and mid-upload', () => {
  it('a client that aborts mid-upload makes the backend see the abort, and nothing is replayed', async () => {
    const stack: Stack = await startStack({ name: 'abort-upload' });
    cleanups.push(() => stack.close());
    const aborted = stack.backend.nextAbort('/upload');
    const before = stack.backend.stats.requests;
    const req = request({
      host: '127.0.0.1',
      port: stack.port,
      method: 'POST',
      path: '/upload',
      headers: { host: stack.host, 'content-length': String(64 * 1024 * 1024) },
      agent: false,
    });
    req.on('error', () => {});
    req.write(Buffer.alloc(1024 * 1024));
    await new Promise((resolve) => setTimeout(resolve, 50));
    req.destroy();
    await aborted;
    expect(stack.backend.stats.requests).toBe(before + 1);
  });

  it('10,000 aborted downloads leave no stream, socket or request behind', async () => {
    const stack: Stack = await startStack({ name: 'many-aborts' });
    cleanups.push(() => stack.close());
    const total = 10_000;
    let started = 0;
    const worker = async (): Promise<void> => {
      while (started < total) {
        started++;
        await new Promise<void>((resolve) => {
          const req = request({
            host: '127.0.0.1',
            port: stack.port,
            path: `/bytes/${256 * 1024}`,
            headers: { host: stack.host },
            agent: false,
          });
          req.on('error', () => resolve());
          req.on('close', () => resolve());
          req.on('response', (res) => res.once('data', () => req.destroy()));
          req.end();
        });
      }
    };
    await Promise.all(Array.from({ length: 50 }, worker));
    const session = stack.edge.sessions.get('many-aborts')!.session;
    await until(
      () => stack.edge.inFlight === 0 && session.streams.size === 0 && stack.backend.stats.inFlight === 0,
    );
    const connections = await new Promise<number>((resolve, reject) =>
      stack.edge.publicServer.getConnections((err, count) => (err ? reject(err) : resolve(count))),
    );
    // Only the agent's WebSocket is left on the edge.
    expect(connections).toBe(1);
  }, 120_000);
});
