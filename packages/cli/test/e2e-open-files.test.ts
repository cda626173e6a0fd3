import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { send } from './support/http-client.js';
import { cliBin } from './support/processes.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Sends a request on a fresh connection: its status line, or undefined if the edge closed it instead. */
async function statusLine(port: number): Promise<string | undefined> {
  const socket: Socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  cleanups.push(() => socket.destroy());
  await once(socket, 'connect');
  return new Promise((resolve) => {
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      const end = text.indexOf('\r\n');
      if (end !== -1) resolve(text.slice(0, end));
    });
    socket.on('close', () => resolve(undefined));
    socket.write('GET / HTTP/1.1\r\nHost: localhost\r\n\r\n');
  });
}

describe('the open-file limit', () => {
  // At the limit itself libuv accepts and closes each new connection (its EMFILE trick) and Node never
  // hears of it: clients got a reset, the operator nothing. The edge now caps its public connections a
  // little below the limit (5 %, at least 8 descriptors kept), so Node drops them itself and says so.
  it('an edge under `ulimit -n 64` refuses connections past its cap with a warning and a counter, and keeps answering on its admin port', async () => {
    const child = spawn(
      'prlimit',
      ['--nofile=64:64', process.execPath, cliBin, 'server', '--port', '0', '--admin-port', '0', '--json'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    cleanups.push(() => child.kill('SIGKILL'));
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string];
    const listening = JSON.parse(line) as { url: string; adminUrl: string };
    const port = Number(new URL(listening.url).port);

    const answered: string[] = [];
    for (;;) {
      const status = await statusLine(port);
      if (status === undefined) break;
      answered.push(status);
      if (answered.length > 64) throw new Error('64 connections held: no cap below the open-file limit');
    }
    expect(answered.length).toBeGreaterThan(10);
    expect(new Set(answered)).toEqual(new Set(['HTTP/1.1 200 OK']));
    // A second one past the cap: counted, within the same warning period.
    expect(await statusLine(port)).toBeUndefined();

    const metrics = await send({ port: Number(new URL(listening.adminUrl).port), path: '/metrics' });
    expect(metrics.status).toBe(200);
    expect(metrics.body.toString()).toContain(
      'tunnel2_public_connections_dropped_total{reason="open_files"} 2',
    );
    const warnings = stderr
      .split('\n')
      .filter((l) => l.includes('"reason":"open_files"'))
      .map((l) => JSON.parse(l) as { level: number; count: number; msg: string });
    expect(warnings).toEqual([expect.objectContaining({ level: 40, count: 1 })]);
    expect(warnings[0]!.msg).toMatch(/open-file limit/);
  });
});
