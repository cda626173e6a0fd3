import { once } from 'node:events';
import { connect as netConnect, type Socket } from 'node:net';
import { spawnNode } from './processes.js';

/**
 * A TCP target that never answers a connect: a child process listens with a backlog of 1 and then blocks
 * its only thread (Atomics.wait, no CPU), so it never accepts; once a few connections fill the kernel's
 * accept queue, further SYNs are dropped and a connect waits for the OS's SYN retries (minutes).
 */
export async function startSilentTarget(): Promise<{ port: number; close(): Promise<void> }> {
  const script = `
    const server = require('node:net').createServer();
    server.listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () => {
      console.log(JSON.stringify({ event: 'listening', port: server.address().port }));
      // Let stdout flush, then block for good.
      setImmediate(() => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0));
    });`;
  const child = spawnNode(['-e', script]);
  const { port } = (await child.waitFor('listening')) as { port: number };
  // The queue of a backlog of 1 holds two: those connect (the kernel answers for the process); more are
  // sent for kernels that hold a few more, and whatever connects after them finds the queue full.
  const fillers: Socket[] = [];
  for (let i = 0; i < 8; i++) {
    const socket = netConnect({ port, host: '127.0.0.1' });
    socket.on('error', () => {});
    fillers.push(socket);
    if (i < 2) await once(socket, 'connect');
  }
  return {
    port,
    async close() {
      for (const socket of fillers) socket.destroy();
      child.kill('SIGKILL');
      await child.exited;
    },
  };
}
