import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect as netConnect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { howItEnds, startHashServer, startTcpStack } from './support/tcp-stack.js';

// A draining edge (SIGTERM: edge.close with a grace) waits for open TCP connections as it waits for
// requests in flight: a connection carried when the drain starts finishes byte-exact within the grace.

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('a draining edge and its TCP connections', () => {
  it('lets a connection open at the drain finish byte-exact, then stops', async () => {
    const backend = await startHashServer();
    cleanups.push(backend.close);
    const stack = await startTcpStack(backend.port);
    cleanups.push(async () => {
      await stack.tunnel.close(0);
    });
    const socket = netConnect({ port: stack.port, host: '127.0.0.1', allowHalfOpen: true });
    await once(socket, 'connect');
    const answer: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => answer.push(chunk));
    const ended = howItEnds(socket);
    const hash = createHash('sha256');
    const first = randomBytes(64 * 1024);
    hash.update(first);
    socket.write(first);
    // The edge has the connection (carried to the agent) before the drain starts.
    for (let i = 0; i < 500 && stack.edge.tcp?.counters.open !== 1; i++)
      await new Promise((resolve) => setTimeout(resolve, 10));
    expect(stack.edge.tcp?.counters.open).toBe(1);
    let stopped = false;
    const closing = stack.edge.close(30_000).then(() => {
      stopped = true;
    });
    // The rest is sent while the edge drains: it must not have stopped meanwhile.
    const rest = randomBytes(512 * 1024 + 3);
    hash.update(rest);
    socket.end(rest);
    expect(await ended).toBe('end');
    expect(Buffer.concat(answer).toString()).toBe(hash.digest('hex'));
    await closing;
    expect(stopped).toBe(true);
  });
});
